package template

import (
	"fmt"
	"io"
	"os"
)

// sparseChunk is the unit copySparse writes or skips: a whole chunk of
// zeros becomes a hole.
const sparseChunk = 64 << 10

// copySparse copies size bytes of r into the empty file f, leaving every
// chunk of zeros as a hole, so a sparse file (which a tar stream carries
// as zeros) stays sparse on the host's disk. charge is called with the
// bytes of each chunk before it is written: holes cost nothing.
func copySparse(f *os.File, r io.Reader, size int64, charge func(int64) error) error {
	buf := make([]byte, sparseChunk)
	var off int64
	for off < size {
		n, err := io.ReadFull(r, buf[:min(int64(len(buf)), size-off)])
		if err != nil {
			if err == io.EOF || err == io.ErrUnexpectedEOF {
				return fmt.Errorf("short file content: %w", io.ErrUnexpectedEOF)
			}
			return err
		}
		if !allZero(buf[:n]) {
			if err := charge(blocks(int64(n))); err != nil {
				return err
			}
			if _, err := f.WriteAt(buf[:n], off); err != nil {
				return err
			}
		}
		off += int64(n)
	}
	return f.Truncate(size)
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
