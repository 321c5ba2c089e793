//go:build !linux

package directio

import "errors"

const supported = false

func openDirect(string) (directFile, error) { return nil, errors.ErrUnsupported }
