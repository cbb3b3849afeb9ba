package template

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// lazyBlobs is the test registry's blob store: in memory, plus generated
// blobs that are never uploaded (a million-entry layer is 512 MB).
type lazyBlobs struct {
	registry.BlobHandler
	mu  sync.Mutex
	gen map[v1.Hash]*genLayer
}

func (b *lazyBlobs) add(g *genLayer) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.gen[g.digest] = g
}

func (b *lazyBlobs) lookup(h v1.Hash) *genLayer {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.gen[h]
}

// Stat implements registry.BlobStatHandler.
func (b *lazyBlobs) Stat(ctx context.Context, repo string, h v1.Hash) (int64, error) {
	if g := b.lookup(h); g != nil {
		return g.size, nil
	}
	return b.BlobHandler.(registry.BlobStatHandler).Stat(ctx, repo, h)
}

// Get implements registry.BlobHandler.
func (b *lazyBlobs) Get(ctx context.Context, repo string, h v1.Hash) (io.ReadCloser, error) {
	if g := b.lookup(h); g != nil {
		return g.Uncompressed()
	}
	return b.BlobHandler.Get(ctx, repo, h)
}

// Put implements registry.BlobPutHandler.
func (b *lazyBlobs) Put(ctx context.Context, repo string, h v1.Hash, rc io.ReadCloser) error {
	return b.BlobHandler.(registry.BlobPutHandler).Put(ctx, repo, h, rc)
}

// genLayer is an uncompressed layer of n empty files d%03d/f%03d,
// generated on every read from a 1000-entry template.
type genLayer struct {
	n      int
	digest v1.Hash
	size   int64
}

var (
	chunkOnce sync.Once
	chunk     []byte  // 1000 headers: d000/f000 .. d000/f999
	chunkSums []int64 // their checksums
)

func genChunk() {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for i := 0; i < 1000; i++ {
		tw.WriteHeader(&tar.Header{Name: fmt.Sprintf("d000/f%03d", i), Typeflag: tar.TypeReg,
			Mode: 0o644, ModTime: time.Unix(1700000000, 0), Format: tar.FormatUSTAR})
	}
	tw.Flush()
	chunk = buf.Bytes()
	for i := 0; i < 1000; i++ {
		sum, _ := strconv.ParseInt(string(chunk[i*512+148:i*512+154]), 8, 64)
		chunkSums = append(chunkSums, sum)
	}
}

func newGenLayer(t *testing.T, n int) *genLayer {
	t.Helper()
	if n%1000 != 0 || n > 1_000_000 {
		t.Fatalf("genLayer: n=%d", n)
	}
	g := &genLayer{n: n}
	h := sha256.New()
	rc, _ := g.Uncompressed()
	size, err := io.Copy(h, rc)
	if err != nil {
		t.Fatal(err)
	}
	g.size = size
	g.digest = v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(h.Sum(nil))}
	return g
}

func (g *genLayer) Digest() (v1.Hash, error)             { return g.digest, nil }
func (g *genLayer) DiffID() (v1.Hash, error)             { return g.digest, nil }
func (g *genLayer) Size() (int64, error)                 { return g.size, nil }
func (g *genLayer) MediaType() (types.MediaType, error)  { return types.DockerUncompressedLayer, nil }
func (g *genLayer) Compressed() (io.ReadCloser, error)   { return g.Uncompressed() }
func (g *genLayer) Uncompressed() (io.ReadCloser, error) { return &genReader{chunks: g.n / 1000}, nil }

type genReader struct {
	next, chunks int
	buf          []byte
	trailer      bool
}

func (r *genReader) Read(p []byte) (int, error) {
	for len(r.buf) == 0 {
		switch {
		case r.next < r.chunks:
			chunkOnce.Do(genChunk)
			r.buf = append(r.buf[:0], chunk...)
			k := r.next
			digits := []byte{byte('0' + k/100), byte('0' + k/10%10), byte('0' + k%10)}
			delta := int64(digits[0]-'0') + int64(digits[1]-'0') + int64(digits[2]-'0')
			for i := 0; i < 1000; i++ {
				b := r.buf[i*512:]
				copy(b[1:4], digits)
				copy(b[148:155], fmt.Appendf(nil, "%06o\x00", chunkSums[i]+delta))
			}
			r.next++
		case !r.trailer:
			r.trailer, r.buf = true, make([]byte, 1024)
		default:
			return 0, io.EOF
		}
	}
	n := copy(p, r.buf)
	r.buf = r.buf[n:]
	return n, nil
}

func (r *genReader) Close() error { return nil }

// sparseTar is an old-GNU sparse entry claiming a realSize-byte file with
// one 512-byte data block at its end, followed by the archive trailer.
func sparseTar(name string, realSize int64) []byte {
	blk := make([]byte, 512)
	copy(blk, name)
	copy(blk[100:], "0000644\x00")
	copy(blk[108:], "0000000\x00")
	copy(blk[116:], "0000000\x00")
	copy(blk[124:], fmt.Sprintf("%011o\x00", 512))
	copy(blk[136:], fmt.Sprintf("%011o\x00", 1700000000))
	blk[156] = tar.TypeGNUSparse
	copy(blk[257:], "ustar  \x00")
	base256(blk[386:398], realSize-512) // sparse entry 0: offset
	copy(blk[398:], fmt.Sprintf("%011o\x00", 512))
	base256(blk[483:495], realSize)
	copy(blk[148:156], "        ")
	var sum int64
	for _, c := range blk {
		sum += int64(c)
	}
	copy(blk[148:], fmt.Sprintf("%06o\x00 ", sum))
	out := append(blk, bytes.Repeat([]byte{'x'}, 512)...)
	return append(out, make([]byte, 1024)...)
}

// base256 writes v in tar's base-256 numeric form.
func base256(f []byte, v int64) {
	for i := len(f) - 1; i > 0; i-- {
		f[i] = byte(v)
		v >>= 8
	}
	f[0] = 0x80
}

// bigHeaderTar is a plain entry whose header claims size bytes, with the
// content cut short: nothing past the header should be needed to refuse it.
func bigHeaderTar(name string, size int64) []byte {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: size, ModTime: time.Unix(1700000000, 0)})
	tw.Write(make([]byte, 4096))
	return buf.Bytes() // no Close: the content is short
}
