package agent

import "testing"

// TestShimFits: a shim takes a command whose RLIMIT_NPROC it can set. It
// can lower its limit but never raise it nor remove it, so a shim that
// set a limit only takes commands limited at most as much.
func TestShimFits(t *testing.T) {
	tests := []struct {
		has, want int
		fits      bool
	}{
		{0, 0, true},     // a new shim, no limit asked
		{0, 300, true},   // a new shim sets one
		{300, 300, true}, // the same again
		{300, 290, true}, // lowered
		{300, 301, false},
		{300, 0, false}, // no limit asked: the shim's would stay
	}
	for _, tt := range tests {
		if got := (&shimProc{nproc: tt.has}).fits(tt.want); got != tt.fits {
			t.Errorf("shim with limit %d, command %d: fits %v, want %v", tt.has, tt.want, got, tt.fits)
		}
	}
}
