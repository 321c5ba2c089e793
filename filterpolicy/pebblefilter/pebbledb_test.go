package pebblefilter

import (
	"context"
	"fmt"
	"testing"

	"github.com/adaptkv/adaptkv/filterpolicy"
	"github.com/cockroachdb/pebble/v2"
	"github.com/stretchr/testify/require"
)

// TestPebbleDB runs a real pebble.DB with our policies on every level:
// every key is found through Get and through SeekPrefixGE with L6 filters,
// and absent keys show filter hits in db.Metrics().
func TestPebbleDB(t *testing.T) {
	n := 200_000
	if testing.Short() {
		n = 40_000
	}
	for _, name := range []string{"prefix", "taf"} {
		t.Run(name, func(t *testing.T) {
			p, err := filterpolicy.ByName(name)
			require.NoError(t, err)
			opts := &pebble.Options{Logger: quietLogger{t}}
			fp, err := New(p)
			require.NoError(t, err)
			for i := range opts.Levels {
				opts.Levels[i].FilterPolicy = fp
				opts.Levels[i].FilterType = pebble.TableFilter
			}
			db, err := pebble.Open(t.TempDir(), opts)
			require.NoError(t, err)
			defer db.Close()

			dbKey := func(i int) []byte { return fmt.Appendf(nil, "k%09d", 2*i) }
			b := db.NewBatch()
			for i := 0; i < n; i++ {
				require.NoError(t, b.Set(dbKey(i), fmt.Appendf(nil, "v%d", i), nil))
				if b.Len() > 1<<20 {
					require.NoError(t, b.Commit(pebble.NoSync))
					b = db.NewBatch()
				}
			}
			require.NoError(t, b.Commit(pebble.NoSync))
			require.NoError(t, db.Flush())
			require.NoError(t, db.Compact(context.Background(), []byte("k"), []byte("l"), true))

			for i := 0; i < n; i++ {
				v, closer, err := db.Get(dbKey(i))
				require.NoError(t, err, "key %d", i)
				require.Equal(t, fmt.Sprintf("v%d", i), string(v))
				require.NoError(t, closer.Close())
			}
			it, err := db.NewIter(&pebble.IterOptions{UseL6Filters: true})
			require.NoError(t, err)
			for i := 0; i < n; i++ {
				require.True(t, it.SeekPrefixGE(dbKey(i)), "key %d", i)
				require.Equal(t, dbKey(i), it.Key())
			}
			hitsBefore := db.Metrics().Filter.Hits
			for i := 0; i < n/10; i++ {
				k := fmt.Appendf(nil, "k%09d", 2*i+1)
				require.False(t, it.SeekPrefixGE(k) && string(it.Key()) == string(k))
			}
			require.NoError(t, it.Close())
			m := db.Metrics()
			t.Logf("%s: filter hits %d, misses %d", name, m.Filter.Hits, m.Filter.Misses)
			require.Greater(t, m.Filter.Hits-hitsBefore, int64(n/10*9/10), "filter must reject most absent keys")
		})
	}
}

// quietLogger keeps Pebble's informational messages out of test output.
type quietLogger struct{ t testing.TB }

func (quietLogger) Infof(string, ...any)           {}
func (l quietLogger) Errorf(f string, args ...any) { l.t.Logf(f, args...) }
func (l quietLogger) Fatalf(f string, args ...any) { l.t.Fatalf(f, args...) }
