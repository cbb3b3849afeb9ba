package sandbox

import "context"

// Updater is implemented by backends that can change the CPU, memory and
// pids limits of a running sandbox in place. DiskMiB is not changed (a
// sandbox's disk is sized when it is created); implementations ignore it.
// The manager uses it to hand a warm-pool sandbox to a request that asks
// for other limits.
type Updater interface {
	Update(ctx context.Context, id string, r Resources) error
}
