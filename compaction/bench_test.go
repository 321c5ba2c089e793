package compaction

import (
	"fmt"
	"math/rand"
	"testing"

	"github.com/adaptkv/adaptkv/internal/base"
	"github.com/adaptkv/adaptkv/internal/rangedel"
)

// discardOutput counts what it is given.
type discardOutput struct{ size uint64 }

func (d *discardOutput) Add(k base.InternalKey, v []byte) error {
	d.size += uint64(len(k.UserKey) + len(v) + 8)
	return nil
}
func (d *discardOutput) EstimatedSize() uint64 { return d.size }
func (d *discardOutput) Finish() (*TableMeta, error) {
	return &TableMeta{Size: d.size}, nil
}
func (d *discardOutput) Abort() error                                 { return nil }
func (d *discardOutput) AddRangeDels(frags []rangedel.Fragment) error { return nil }

// BenchmarkRun reports the cost per input entry (ns/op is per entry) of Run over a merging
// iterator of 8 inputs where each user key has 4 versions (one kept, or
// two with a snapshot in the middle), output discarded.
func BenchmarkRun(b *testing.B) {
	for _, snaps := range [][]uint64{nil, {1 << 30}} {
		b.Run(fmt.Sprintf("snapshots=%d", len(snaps)), func(b *testing.B) {
			const keys = 1 << 14
			rng := rand.New(rand.NewSource(1))
			children := make([][]entry, 8)
			for i := 0; i < keys; i++ {
				uk := []byte(fmt.Sprintf("user%012d", i))
				for v := 0; v < 4; v++ {
					seq := uint64(v)<<30 + uint64(i) // two versions below the snapshot
					c := rng.Intn(8)
					children[c] = append(children[c], entry{Key: base.InternalKey{UserKey: uk, Seq: seq, Kind: base.KeyKindSet}, Value: []byte("value")})
				}
			}
			for _, c := range children {
				sortEntries(c)
			}
			b.ReportAllocs()
			b.ResetTimer()
			entries := 0
			for entries < b.N {
				it, _ := newMerged(children)
				_, err := Run(it, RunOptions{Snapshots: snaps, TargetFileSize: 2 << 20,
					NewOutput: func() (Output, error) { return &discardOutput{}, nil }})
				if err != nil {
					b.Fatal(err)
				}
				entries += 4 * keys
			}
		})
	}
}
