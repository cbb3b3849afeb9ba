package manager

import "testing"

// TestCleanupWorkers: the bound of deferred cleanups running at once
// defaults, and is capped.
func TestCleanupWorkers(t *testing.T) {
	for _, tc := range []struct{ set, want int }{
		{0, DefaultCleanupWorkers}, {-3, DefaultCleanupWorkers}, {1, 1}, {32, 32}, {100000, maxCleanupWorkers},
	} {
		if got := cleanupWorkers(Config{CleanupWorkers: tc.set}); got != tc.want {
			t.Errorf("CleanupWorkers %d: %d workers, want %d", tc.set, got, tc.want)
		}
	}
}
