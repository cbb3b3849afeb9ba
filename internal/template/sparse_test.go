package template

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestCommitSparse: a sparse file in the upper dir stays sparse in the
// committed layer (its host disk is its data, not its size), and a cap
// (the sandbox's disk_mib) refuses a layer whose data is larger.
func TestCommitSparse(t *testing.T) {
	const base = 5 << 16
	cases := []struct {
		name     string
		data     int64 // bytes of real data at the start of the file
		size     int64 // apparent size
		maxBytes int64
		wantErr  error
	}{
		{"1 GiB hole under a 64 MiB cap", 4096, 1 << 30, 64 << 20, nil},
		{"data over the cap", 2 << 20, 8 << 20, 1 << 20, ErrLimit},
		{"no cap", 1 << 20, 256 << 20, 0, nil},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, nil)
			up := filepath.Join(e.dir, "outside", "upper")
			if err := os.MkdirAll(up, 0o755); err != nil {
				t.Fatal(err)
			}
			os.Lchown(up, base, base)
			f, err := os.Create(filepath.Join(up, "sparse"))
			if err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, c.data)
			for j := range buf {
				buf[j] = 'x'
			}
			f.Write(buf)
			f.Truncate(c.size)
			f.Close()
			im, err := e.store.Commit(context.Background(), "snap"+string(rune('a'+i)), nil, up, base, c.maxBytes, ImageConfig{})
			if c.wantErr != nil {
				if !errors.Is(err, c.wantErr) {
					t.Fatalf("commit: %v, want %v", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var st unix.Stat_t
			if err := unix.Stat(filepath.Join(im.LowerDirs[0], "sparse"), &st); err != nil {
				t.Fatal(err)
			}
			if st.Size != c.size {
				t.Fatalf("size %d, want %d", st.Size, c.size)
			}
			// Bound: the data rounded to chunks, plus 1 MiB of file system slack.
			if disk := st.Blocks * 512; disk > c.data+sparseChunk+(1<<20) {
				t.Fatalf("the committed file takes %d bytes of disk for %d of data", disk, c.data)
			}
			if im.Size > c.data+sparseChunk+(1<<20) {
				t.Fatalf("layer charged %d bytes for %d of data", im.Size, c.data)
			}
		})
	}
}
