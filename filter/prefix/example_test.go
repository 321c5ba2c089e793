package prefix_test

import (
	"fmt"

	"github.com/adaptkv/adaptkv/filter/prefix"
)

func Example() {
	keys := [][]byte{[]byte("apple"), []byte("banana"), []byte("cherry")}
	f, err := prefix.BuildWithSeed(keys, 42)
	if err != nil {
		panic(err)
	}
	fmt.Println(f.MayContain([]byte("banana")))

	// The encoding can be stored and queried in place after Decode.
	data, _ := f.MarshalBinary()
	g, err := prefix.Decode(data)
	if err != nil {
		panic(err)
	}
	fmt.Println(g.MayContain([]byte("cherry")), g.Seed())

	// Corrupt bytes are rejected.
	data[len(data)/2] ^= 1
	_, err = prefix.Decode(data)
	fmt.Println(err != nil)
	// Output:
	// true
	// true 42
	// true
}
