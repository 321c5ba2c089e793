package directio

import "syscall"

const supported = true

// fdFile is a descriptor opened with O_DIRECT.
type fdFile struct{ fd int }

func openDirect(name string) (directFile, error) {
	fd, err := syscall.Open(name, syscall.O_RDONLY|syscall.O_DIRECT|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	return &fdFile{fd: fd}, nil
}

// pread reads len(p) bytes at off (both aligned, p aligned), retrying
// short reads until the file ends.
func (f *fdFile) pread(p []byte, off int64) (int, error) {
	n := 0
	for n < len(p) {
		m, err := syscall.Pread(f.fd, p[n:], off+int64(n))
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return n, err
		}
		if m == 0 {
			break // end of file
		}
		n += m
		if m%Align != 0 {
			break // a short read past the last aligned block: the end
		}
	}
	return n, nil
}

func (f *fdFile) close() error { return syscall.Close(f.fd) }
