package main

// Result is one (policy, workload) row. Field names of the store's counters
// are those of docs/ARCHITECTURE.md ("Metrics"); counters a store does not measure are null.
type Result struct {
	Policy   string `json:"policy"`
	Workload string `json:"workload"`
	Records  uint64 `json:"records"` // records in the store when the workload started
	Threads  int    `json:"threads"`
	// Repeat is the run (0..-repeat-1) and Seed its seed (-seed + Repeat).
	Repeat int    `json:"repeat"`
	Seed   uint64 `json:"seed"`
	// Runs is the number of runs a summary row is the median of (0 for a
	// single run's row); the ranges are their minimum and maximum.
	Runs              int         `json:"runs,omitempty"`
	OpsPerSecRange    *[2]float64 `json:"ops_per_sec_range,omitempty"`
	P999Range         *[2]float64 `json:"p999_us_range,omitempty"`
	FPPer1kGetsRange  *[2]float64 `json:"fp_probes_per_1k_gets_range,omitempty"`
	ProbesPerGetRange *[2]float64 `json:"probes_per_get_range,omitempty"`

	// What kvbench issued.
	Ops              uint64 `json:"ops"`
	Reads            uint64 `json:"reads"`        // Gets issued: reads, absent-key reads, reads of read-modify-writes
	AbsentReads      uint64 `json:"absent_reads"` // Gets of keys never stored
	UniqueAbsentKeys uint64 `json:"unique_absent_keys"`
	UniquePresent    uint64 `json:"unique_present_keys"`
	StoredNotFound   uint64 `json:"stored_not_found"` // Gets of stored keys that found nothing: must be 0
	Updates          uint64 `json:"updates"`
	Inserts          uint64 `json:"inserts"`
	Scans            uint64 `json:"scans"`
	ReadModifyWrites uint64 `json:"read_modify_writes"`

	Seconds   float64 `json:"seconds"`
	OpsPerSec float64 `json:"ops_per_sec"`
	P50us     float64 `json:"p50_us"`
	P99us     float64 `json:"p99_us"`
	P999us    float64 `json:"p999_us"`

	// Store counters: deltas over the run phase.
	Gets                 uint64   `json:"gets"`
	FilterChecks         uint64   `json:"filter_checks"`
	FilterNegatives      uint64   `json:"filter_negatives"`
	FilterMaybes         uint64   `json:"filter_maybes"`     // table probes: the filters' "maybe" answers and unfiltered probes
	UnfilteredProbes     uint64   `json:"unfiltered_probes"` // table probes made without a filter (Pebble's DB.Get in L6)
	FalsePositiveProbes  *uint64  `json:"false_positive_probes"`
	TruePositiveProbes   *uint64  `json:"true_positive_probes"`
	DataBlockReads       *uint64  `json:"data_block_reads"`
	Adaptations          *uint64  `json:"adaptations"`
	FixesDeferred        *uint64  `json:"fixes_deferred"`
	FixesDropped         *uint64  `json:"fixes_dropped"`
	FalsePositivesCached *uint64  `json:"false_positives_cached"`
	Rebuilds             *uint64  `json:"rebuilds"`
	RemoteReads          *uint64  `json:"remote_reads"`
	RemoteCacheHits      *uint64  `json:"remote_cache_hits"`
	FilterBitsPerKey     float64  `json:"filter_bits_per_key"` // in memory, per table entry (the store's figure)
	FilterMemoryBytes    uint64   `json:"filter_memory_bytes"`
	BitsPerKey           float64  `json:"bits_per_key"` // filter memory bits per stored key (records loaded + inserted)
	TablesPerLevel       [7]int   `json:"tables_per_level"`
	ProbesPerGet         float64  `json:"probes_per_get"` // table probes (filter "maybe") per Get: read amplification
	FPProbesPer1kGets    *float64 `json:"fp_probes_per_1k_gets"`
	FPProbesPer1kChecks  *float64 `json:"fp_probes_per_1k_checks"` // per table considered (filter checks and unfiltered probes): comparable across tree shapes
	DataBlockReadsPer    *float64 `json:"data_block_reads_per_get"`
	// Reads of table files (device reads with -direct), Gets' and
	// compactions' alike, and the bytes they read.
	TableReads          *uint64  `json:"table_reads"`
	TableReadBytes      *uint64  `json:"table_read_bytes"`
	TableReadsPer1kGets *float64 `json:"table_reads_per_1k_gets"`
	TableKiBPerGet      *float64 `json:"table_kib_per_get"`

	// The run's lower bound: an ideal adaptive filter with the same
	// first-time false-positive rate eps pays each unique (key, table) pair
	// reaching a filter check at most once:
	//   fp_lower_bound = eps × (unique_absent_keys × checks_per_absent_get
	//                           + unique_present_keys × fp_checks_per_present_get)
	// eps and the per-Get check counts are measured on this store by the
	// calibration pass (fresh keys, after load); checks_per_absent_get is the
	// run's own filter_checks/gets when every read is of an absent key.
	Eps                   float64  `json:"eps"`
	ChecksPerAbsentGet    float64  `json:"checks_per_absent_get"`
	FPChecksPerPresentGet *float64 `json:"fp_checks_per_present_get"`
	FPLowerBound          *float64 `json:"fp_lower_bound"`
	// WriteAmp is the table bytes flushes and compactions wrote during the
	// workload per byte flushed (null when nothing was flushed).
	WriteAmp *float64 `json:"write_amp"`
	// MemTablePeakBytes is the most memory the store's memtables held
	// during the workload (sampled every memSampleEvery); RSSPeakBytes the
	// process's peak resident set during it (null where not reported).
	MemTablePeakBytes uint64  `json:"memtable_peak_bytes"`
	RSSPeakBytes      *uint64 `json:"rss_peak_bytes"`

	Adversary *AdversaryResult `json:"adversary,omitempty"`
}

// AdversaryResult describes the rounds of the adversarial workload.
type AdversaryResult struct {
	Rounds      []AdversaryRound `json:"rounds"`
	FinalFPRate float64          `json:"final_fp_rate"` // false-positive probes per Get in the last round
}

// AdversaryRound is one round: |Q| keys queried Subrounds times each.
type AdversaryRound struct {
	Queries  int    `json:"queries"`
	Gets     uint64 `json:"gets"`
	FPProbes uint64 `json:"fp_probes"`
	FPKeys   int    `json:"fp_keys"` // keys that were a false positive at least once: next round's Q
}

// fillCounters copies the run's counter deltas into res and derives the
// per-Get figures and the lower bound.
func fillCounters(res *Result, d Counters, cal calibration) {
	res.Gets = d.Gets
	if !d.Known.Gets {
		res.Gets = res.Reads
	}
	res.FilterChecks = d.FilterChecks
	res.FilterNegatives = d.FilterNegatives
	res.UnfilteredProbes = d.UnfilteredProbes
	// Probes are the filters' "maybe" answers; a store without filters
	// ("none") asks none and counts its probes as false and true positives.
	res.FilterMaybes = d.Maybes()
	if d.FilterChecks == 0 && d.Known.ProbeSplit {
		res.FilterMaybes = d.FalsePositiveProbes + d.TruePositiveProbes
	}
	absentOnly := res.Reads > 0 && res.AbsentReads == res.Reads
	switch {
	case d.Known.ProbeSplit:
		res.FalsePositiveProbes = u64p(d.FalsePositiveProbes)
		res.TruePositiveProbes = u64p(d.TruePositiveProbes)
	case absentOnly:
		// Every "maybe" on an absent key is a false positive.
		res.FalsePositiveProbes = u64p(d.Maybes())
		res.TruePositiveProbes = u64p(0)
	}
	if d.Known.DataBlockReads {
		res.DataBlockReads = u64p(d.DataBlockReads)
	}
	if d.Known.TableReads {
		res.TableReads, res.TableReadBytes = u64p(d.TableReads), u64p(d.TableReadBytes)
	}
	if d.Known.Adaptive {
		res.Adaptations = u64p(d.Adaptations)
		res.FixesDeferred = u64p(d.FixesDeferred)
		res.FixesDropped = u64p(d.FixesDropped)
		res.FalsePositivesCached = u64p(d.FalsePositivesCached)
		res.Rebuilds = u64p(d.Rebuilds)
		res.RemoteReads = u64p(d.RemoteReads)
		res.RemoteCacheHits = u64p(d.RemoteCacheHits)
	}
	res.FilterBitsPerKey = d.FilterBitsPerKey
	res.FilterMemoryBytes = d.FilterMemoryBytes
	// Filter memory per stored key: the records loaded plus those the run
	// inserted (the filter memory is measured at the end of the run).
	if stored := res.Records + res.Inserts; stored > 0 {
		res.BitsPerKey = float64(d.FilterMemoryBytes*8) / float64(stored)
	}
	res.TablesPerLevel = d.Files
	if d.BytesFlushed > 0 {
		res.WriteAmp = f64p(float64(d.BytesFlushed+d.BytesCompacted) / float64(d.BytesFlushed))
	}
	if res.Gets > 0 {
		res.perGet()
	}
	res.Eps = cal.eps
	res.ChecksPerAbsentGet = cal.checksPerAbsentGet
	if absentOnly {
		res.ChecksPerAbsentGet = float64(candidates(d.Candidates(), res.FilterMaybes)) / float64(res.Reads)
	}
	res.FPChecksPerPresentGet = cal.fpChecksPerPresentGet
	presentReads := res.Reads - res.AbsentReads
	switch {
	case presentReads == 0:
		res.FPLowerBound = f64p(cal.eps * float64(res.UniqueAbsentKeys) * res.ChecksPerAbsentGet)
	case cal.fpChecksPerPresentGet != nil:
		res.FPLowerBound = f64p(cal.eps * (float64(res.UniqueAbsentKeys)*res.ChecksPerAbsentGet +
			float64(res.UniquePresent)**cal.fpChecksPerPresentGet))
	}
}

// perGet derives the per-Get figures from res's counts (res.Gets > 0).
func (res *Result) perGet() {
	g := float64(res.Gets)
	res.ProbesPerGet = float64(res.FilterMaybes) / g
	if res.FalsePositiveProbes != nil {
		res.FPProbesPer1kGets = f64p(float64(*res.FalsePositiveProbes) * 1000 / g)
	}
	if cand := res.FilterChecks + res.UnfilteredProbes; res.FalsePositiveProbes != nil && cand > 0 {
		res.FPProbesPer1kChecks = f64p(float64(*res.FalsePositiveProbes) * 1000 / float64(cand))
	}
	if res.DataBlockReads != nil {
		res.DataBlockReadsPer = f64p(float64(*res.DataBlockReads) / g)
	}
	if res.TableReads != nil {
		res.TableReadsPer1kGets = f64p(float64(*res.TableReads) * 1000 / g)
		res.TableKiBPerGet = f64p(float64(*res.TableReadBytes) / 1024 / g)
	}
}

func u64p(v uint64) *uint64   { return &v }
func f64p(v float64) *float64 { return &v }
