package base

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestInvalidOptions: an error a lower layer already marked as invalid
// options keeps one mention of the sentinel, with the context before it;
// any other error is marked; the original stays reachable.
func TestInvalidOptions(t *testing.T) {
	lower := fmt.Errorf("%w: LoadFactor 2 outside (0, 0.95]", ErrInvalidOptions)
	other := errors.New("bad seed")
	cases := []struct {
		context string
		err     error
		want    string
	}{
		{"", lower, "adaptkv: invalid options: LoadFactor 2 outside (0, 0.95]"},
		{"taf", lower, "taf: adaptkv: invalid options: LoadFactor 2 outside (0, 0.95]"},
		{"", other, "adaptkv: invalid options: bad seed"},
		{"Filter", other, "adaptkv: invalid options: Filter: bad seed"},
	}
	for _, c := range cases {
		got := InvalidOptions(c.context, c.err)
		require.ErrorIs(t, got, ErrInvalidOptions)
		require.ErrorIs(t, got, c.err)
		require.Equal(t, c.want, got.Error())
		require.Equal(t, 1, strings.Count(got.Error(), "invalid options"))
	}
	require.NotErrorIs(t, ErrInvalidOptions, ErrClosed)
}
