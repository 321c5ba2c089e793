package quotient_test

import (
	"fmt"

	"github.com/adaptkv/adaptkv/filter/quotient"
)

// A table writer builds the filter and keeps its remote representation
// next to the data; a reader decodes the local state, queries it, and fixes
// the false positives its lookups reveal.
func Example() {
	b := quotient.NewBuilder(quotient.TAF, quotient.Options{Seed: 42}, 3)
	for _, k := range []string{"apple", "banana", "cherry"} {
		b.Add([]byte(k))
	}
	f, remote, err := b.Finish()
	if err != nil {
		panic(err)
	}
	local, _ := f.MarshalBinary() // stored with the table, as is remote

	g, err := quotient.Decode(local, remote)
	if err != nil {
		panic(err)
	}
	fmt.Println(g.MayContain([]byte("banana")), g.Len(), g.Slots() == len(remote))
	for i := 0; i < 100000; i++ {
		k := []byte(fmt.Sprint("absent-", i))
		if g.MayContain(k) { // the table lookup finds nothing: a false positive
			if err := g.Adapt(k); err != nil {
				panic(err)
			}
		}
	}
	fmt.Println(g.Stats().Adaptations > 0, g.MayContain([]byte("banana")))
	// Output:
	// true 3 true
	// true true
}
