package filtertest

// FilterWriter is what WriteBlock writes to: Pebble's FilterWriter.
type FilterWriter interface {
	AddKey(key []byte)
	Finish(buf []byte) []byte
}

// WriteBlock runs Pebble's filter-writer protocol on w over key(0..n-1):
// every key added three times (versions) through one reused buffer, which
// is scribbled on after each AddKey as Pebble may do, then Finish.
func WriteBlock(w FilterWriter, n int, key func(int) []byte) []byte {
	buf := make([]byte, 0, 32)
	for i := 0; i < n; i++ {
		for v := 0; v < 3; v++ {
			buf = append(buf[:0], key(i)...)
			w.AddKey(buf)
			for j := range buf {
				buf[j] = 0xAA
			}
		}
	}
	return w.Finish(nil)
}
