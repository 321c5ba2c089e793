package kv_test

import (
	"errors"
	"fmt"

	"github.com/adaptkv/adaptkv/kv"
	"github.com/cockroachdb/pebble/v2/vfs"
)

func Example() {
	db, err := kv.Open("demo", &kv.Options{FS: vfs.NewMem()}) // default filter policy: "aprefix"
	if err != nil {
		panic(err)
	}
	defer db.Close()

	_ = db.Set([]byte("apple"), []byte("red"), kv.Sync)
	b := db.NewBatch()
	_ = b.Set([]byte("banana"), []byte("yellow"))
	_ = b.Set([]byte("cherry"), []byte("dark red"))
	_ = b.Delete([]byte("apple"))
	_ = db.Apply(b, kv.NoSync) // atomic: one WAL record

	if _, err := db.Get([]byte("apple")); errors.Is(err, kv.ErrNotFound) {
		fmt.Println("apple: not found")
	}
	it, _ := db.NewIter(&kv.IterOptions{LowerBound: []byte("b")})
	for ok := it.First(); ok; ok = it.Next() {
		fmt.Printf("%s=%s\n", it.Key(), it.Value())
	}
	_ = it.Close()
	// Output:
	// apple: not found
	// banana=yellow
	// cherry=dark red
}

// ReadCounts is cheap enough to read around a single Get: here, what one
// Get of an absent key cost.
func ExampleDB_ReadCounts() {
	db, err := kv.Open("demo", &kv.Options{FS: vfs.NewMem()})
	if err != nil {
		panic(err)
	}
	defer db.Close()
	for i := range 1000 {
		_ = db.Set(fmt.Appendf(nil, "key%04d", i), []byte("v"), kv.NoSync)
	}
	_ = db.Flush() // into a table, behind its filter

	before := db.ReadCounts()
	_, err = db.Get([]byte("key0500x"))
	after := db.ReadCounts()
	fmt.Println(errors.Is(err, kv.ErrNotFound), after.Gets-before.Gets)
	fmt.Println("wasted probes:", after.FalsePositiveProbes-before.FalsePositiveProbes <= 1)
	// Output:
	// true 1
	// wasted probes: true
}
