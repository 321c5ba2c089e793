package ycsb

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// errBadProperty is wrapped by every error about a property's value.
var errBadProperty = errors.New("ycsb: bad property")

// Distribution names a request distribution.
type Distribution string

// Request distributions (YCSB's requestdistribution values).
const (
	DistZipfian Distribution = "zipfian" // scrambled zipfian, θ = zipfianconstant
	DistUniform Distribution = "uniform"
	DistLatest  Distribution = "latest"
)

// Workload is one parsed workload: YCSB's core properties plus kvbench's
// extensions. Proportions are as written; Mix normalizes them.
type Workload struct {
	Name string // file base name, or the name property

	RecordCount    uint64 // recordcount
	OperationCount uint64 // operationcount
	FieldCount     int    // fieldcount (kvbench stores one value of FieldCount*FieldLength bytes)
	FieldLength    int    // fieldlength

	ReadProportion            float64 // readproportion
	UpdateProportion          float64 // updateproportion
	InsertProportion          float64 // insertproportion
	ScanProportion            float64 // scanproportion
	ReadModifyWriteProportion float64 // readmodifywriteproportion

	RequestDistribution Distribution // requestdistribution
	ZipfianConstant     float64      // zipfianconstant (kvbench; YCSB fixes 0.99)
	MaxScanLength       int          // maxscanlength (scan lengths uniform in [1, max])

	// NegativeProportion is the share of plain reads (not the reads of
	// read-modify-writes) that ask for an absent key.
	NegativeProportion   float64      // negativeproportion
	NegativeDistribution Distribution // negativedistribution: zipfian or uniform
	NegativeUniverse     uint64       // negativeuniverse: absent keys to draw from (0 = recordcount)
	// NegativeShift, when positive, is the share of each thread's
	// operations after which absent reads draw from a second universe of
	// the same size, disjoint from the first: the hot absent set changes.
	NegativeShift float64 // negativeshift

	// Adversary selects the adversarial stream of the TAF paper (§6.1)
	// instead of the operation mix.
	Adversary          bool   // adversary
	AdversaryQueries   uint64 // adversaryqueries: |Q| of round 1 (0 = operationcount/adversarysubrounds)
	AdversarySubrounds int    // adversarysubrounds (paper: 10)
	AdversaryMaxRounds int    // adversarymaxrounds
}

// ValueSize is the size of a stored value in bytes.
func (w *Workload) ValueSize() int { return w.FieldCount * w.FieldLength }

// Mix returns the operations' shares, in the order read, update, insert,
// scan, read-modify-write: the proportions as written, normalized to sum
// to 1 (all zero when the proportions are).
func (w *Workload) Mix() [5]float64 {
	p := [5]float64{w.ReadProportion, w.UpdateProportion, w.InsertProportion, w.ScanProportion, w.ReadModifyWriteProportion}
	total := 0.0
	for _, x := range p {
		total += x
	}
	if total <= 0 {
		return [5]float64{}
	}
	for i := range p {
		p[i] /= total
	}
	return p
}

// defaults returns YCSB's CoreWorkload defaults, except that a record is one
// 100-byte field (kvbench stores single values).
func defaults() Workload {
	return Workload{
		RecordCount:          1000,
		OperationCount:       1000,
		FieldCount:           1,
		FieldLength:          100,
		ReadProportion:       0.95,
		UpdateProportion:     0.05,
		RequestDistribution:  DistUniform,
		ZipfianConstant:      ZipfianConstant,
		MaxScanLength:        1000,
		NegativeDistribution: DistZipfian,
		AdversarySubrounds:   10,
		AdversaryMaxRounds:   10,
	}
}

// ParseFile reads a workload property file. The workload's name is the
// file's base name unless the file sets "name".
func ParseFile(path string) (*Workload, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	w, err := Parse(f, filepath.Base(path))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return w, nil
}

// Parse reads Java-style properties (key=value or key: value lines, '#' and
// '!' comments) into a Workload named name. Unknown keys are ignored (YCSB
// files carry client settings such as "workload" or "db"); known keys with bad
// values are errors.
func Parse(r io.Reader, name string) (*Workload, error) {
	props := map[string]string{}
	sc := bufio.NewScanner(r)
	line := 0
	for sc.Scan() {
		line++
		s := strings.TrimSpace(sc.Text())
		if s == "" || s[0] == '#' || s[0] == '!' {
			continue
		}
		i := strings.IndexAny(s, "=:")
		if i <= 0 {
			return nil, fmt.Errorf("%w: line %d: %q is not key=value", errBadProperty, line, s)
		}
		props[strings.TrimSpace(s[:i])] = strings.TrimSpace(s[i+1:])
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return FromProperties(props, name)
}

// FromProperties builds a Workload from parsed properties.
func FromProperties(props map[string]string, name string) (*Workload, error) {
	w := defaults()
	w.Name = name
	if v, ok := props["name"]; ok && v != "" {
		w.Name = v
	}
	pr := &propReader{props: props}
	pr.u64("recordcount", &w.RecordCount)
	pr.u64("operationcount", &w.OperationCount)
	pr.posInt("fieldcount", &w.FieldCount)
	pr.posInt("fieldlength", &w.FieldLength)
	pr.prop("readproportion", &w.ReadProportion)
	pr.prop("updateproportion", &w.UpdateProportion)
	pr.prop("insertproportion", &w.InsertProportion)
	pr.prop("scanproportion", &w.ScanProportion)
	pr.prop("readmodifywriteproportion", &w.ReadModifyWriteProportion)
	pr.dist("requestdistribution", &w.RequestDistribution, DistZipfian, DistUniform, DistLatest)
	pr.posInt("maxscanlength", &w.MaxScanLength)
	pr.prop("negativeproportion", &w.NegativeProportion)
	pr.dist("negativedistribution", &w.NegativeDistribution, DistZipfian, DistUniform)
	pr.u64("negativeuniverse", &w.NegativeUniverse)
	pr.prop("negativeshift", &w.NegativeShift)
	pr.boolean("adversary", &w.Adversary)
	pr.u64("adversaryqueries", &w.AdversaryQueries)
	pr.posInt("adversarysubrounds", &w.AdversarySubrounds)
	pr.posInt("adversarymaxrounds", &w.AdversaryMaxRounds)
	if v, ok := props["zipfianconstant"]; ok {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || !(f > 0 && f < 1) {
			pr.errs = append(pr.errs, fmt.Errorf("%w: zipfianconstant=%q: want 0 < θ < 1", errBadProperty, v))
		} else {
			w.ZipfianConstant = f
		}
	}
	if v, ok := props["fieldlengthdistribution"]; ok && v != "constant" {
		pr.errs = append(pr.errs, fmt.Errorf("%w: fieldlengthdistribution=%q: kvbench supports only constant", errBadProperty, v))
	}
	if v, ok := props["scanlengthdistribution"]; ok && v != "uniform" {
		pr.errs = append(pr.errs, fmt.Errorf("%w: scanlengthdistribution=%q: kvbench supports only uniform", errBadProperty, v))
	}
	if len(pr.errs) == 0 {
		pr.errs = append(pr.errs, w.Validate())
	}
	if err := errors.Join(pr.errs...); err != nil {
		return nil, err
	}
	return &w, nil
}

// propReader parses typed properties into their fields, collecting an
// error for each bad value; a missing key leaves its field as it is.
type propReader struct {
	props map[string]string
	errs  []error
}

func (r *propReader) u64(key string, dst *uint64) {
	if v, ok := r.props[key]; ok {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			r.errs = append(r.errs, fmt.Errorf("%w: %s=%q: want a non-negative integer", errBadProperty, key, v))
			return
		}
		*dst = n
	}
}

func (r *propReader) posInt(key string, dst *int) {
	if v, ok := r.props[key]; ok {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			r.errs = append(r.errs, fmt.Errorf("%w: %s=%q: want a positive integer", errBadProperty, key, v))
			return
		}
		*dst = n
	}
}

// prop reads a proportion in [0, 1].
func (r *propReader) prop(key string, dst *float64) {
	if v, ok := r.props[key]; ok {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f < 0 || f > 1 || f != f {
			r.errs = append(r.errs, fmt.Errorf("%w: %s=%q: want a proportion in [0, 1]", errBadProperty, key, v))
			return
		}
		*dst = f
	}
}

func (r *propReader) dist(key string, dst *Distribution, allowed ...Distribution) {
	if v, ok := r.props[key]; ok {
		for _, a := range allowed {
			if Distribution(v) == a {
				*dst = a
				return
			}
		}
		r.errs = append(r.errs, fmt.Errorf("%w: %s=%q: want one of %v", errBadProperty, key, v, allowed))
	}
}

func (r *propReader) boolean(key string, dst *bool) {
	if v, ok := r.props[key]; ok {
		b, err := strconv.ParseBool(v)
		if err != nil {
			r.errs = append(r.errs, fmt.Errorf("%w: %s=%q: want true or false", errBadProperty, key, v))
			return
		}
		*dst = b
	}
}

// Validate checks the consistency of a workload.
func (w *Workload) Validate() error {
	if w.RecordCount == 0 {
		return fmt.Errorf("%w: recordcount must be positive", errBadProperty)
	}
	if w.Adversary {
		return nil
	}
	if w.ReadProportion+w.UpdateProportion+w.InsertProportion+w.ScanProportion+w.ReadModifyWriteProportion <= 0 {
		return fmt.Errorf("%w: workload %s: all operation proportions are zero", errBadProperty, w.Name)
	}
	return nil
}
