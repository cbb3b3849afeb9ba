package egress

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/paddock-sandbox/paddock/internal/store"
)

// File names of the CA inside the directory given to NewCA.
const (
	CACertFile = "egress-ca.pem"
	CAKeyFile  = "egress-ca-key.pem"
)

// CAName is the subject common name of the per-daemon CA.
const CAName = "Paddock egress CA"

const (
	caValidity   = 10 * 365 * 24 * time.Hour
	leafValidity = 7 * 24 * time.Hour
	leafCacheMax = 1024
)

// NewCA loads the per-daemon CA from dir, or creates one (ECDSA P-256,
// valid ten years, named CAName) and writes it there: the certificate to
// CACertFile (0644) and the key to CAKeyFile (0600). It returns the CA as
// a tls.Certificate with Leaf set, and the certificate's PEM, which goes
// into every sandbox's trust store.
func NewCA(dir string) (tls.Certificate, []byte, error) {
	certPath := filepath.Join(dir, CACertFile)
	keyPath := filepath.Join(dir, CAKeyFile)
	certPEM, cerr := os.ReadFile(certPath)
	keyPEM, kerr := os.ReadFile(keyPath)
	switch {
	case cerr == nil && kerr == nil:
		ca, err := parseCA(certPEM, keyPEM)
		if err != nil {
			return tls.Certificate{}, nil, fmt.Errorf("egress: load CA from %s: %w", dir, err)
		}
		return ca, certPEM, nil
	case errors.Is(cerr, fs.ErrNotExist) && errors.Is(kerr, fs.ErrNotExist):
	case cerr != nil && !errors.Is(cerr, fs.ErrNotExist):
		return tls.Certificate{}, nil, fmt.Errorf("egress: load CA: %w", cerr)
	case kerr != nil && !errors.Is(kerr, fs.ErrNotExist):
		return tls.Certificate{}, nil, fmt.Errorf("egress: load CA: %w", kerr)
	default:
		return tls.Certificate{}, nil, fmt.Errorf("egress: CA in %s is incomplete: one of %s, %s is missing", dir, CACertFile, CAKeyFile)
	}

	certPEM, keyPEM, err := generateCA(time.Now())
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("egress: %w", err)
	}
	// The key first: a crash in between leaves a key without a certificate,
	// which the next start reports instead of silently replacing a CA that
	// sandboxes may already trust.
	if err := store.WriteFileAtomic(keyPath, keyPEM, 0o600); err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("egress: %w", err)
	}
	if err := store.WriteFileAtomic(certPath, certPEM, 0o644); err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("egress: %w", err)
	}
	ca, err := parseCA(certPEM, keyPEM)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	return ca, certPEM, nil
}

func generateCA(now time.Time) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("egress: CA key: %w", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, fmt.Errorf("egress: CA key: %w", err)
	}
	pubDER, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return nil, nil, fmt.Errorf("egress: CA key: %w", err)
	}
	ski := sha256.Sum256(pubDER)
	tmpl := &x509.Certificate{
		SerialNumber:          randomSerial(),
		Subject:               pkix.Name{CommonName: CAName, Organization: []string{"Paddock"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(caValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLen:            0,
		MaxPathLenZero:        true,
		SubjectKeyId:          ski[:20],
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, fmt.Errorf("egress: CA certificate: %w", err)
	}
	certPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM = pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
	return certPEM, keyPEM, nil
}

func parseCA(certPEM, keyPEM []byte) (tls.Certificate, error) {
	ca, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return tls.Certificate{}, err
	}
	if ca.Leaf == nil {
		if ca.Leaf, err = x509.ParseCertificate(ca.Certificate[0]); err != nil {
			return tls.Certificate{}, err
		}
	}
	if !ca.Leaf.IsCA {
		return tls.Certificate{}, errors.New("certificate is not a CA")
	}
	return ca, nil
}

func randomSerial() *big.Int {
	b := make([]byte, 16)
	rand.Read(b)
	b[0] &= 0x7f
	return new(big.Int).SetBytes(b)
}

// leafCache mints and caches the certificates the proxy presents when it
// terminates TLS for a secret's host.
type leafCache struct {
	ca  tls.Certificate
	mu  sync.Mutex
	m   map[string]*tls.Certificate
	now func() time.Time
}

func newLeafCache(ca tls.Certificate) *leafCache {
	if ca.Leaf == nil && len(ca.Certificate) > 0 {
		ca.Leaf, _ = x509.ParseCertificate(ca.Certificate[0])
	}
	return &leafCache{ca: ca, m: make(map[string]*tls.Certificate), now: time.Now}
}

// get returns a certificate for name, minting one if none is cached or the
// cached one is within a day of expiry.
func (c *leafCache) get(name string) (*tls.Certificate, error) {
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if cert, ok := c.m[name]; ok && now.Add(24*time.Hour).Before(cert.Leaf.NotAfter) {
		return cert, nil
	}
	cert, err := c.mint(name, now)
	if err != nil {
		return nil, err
	}
	if len(c.m) >= leafCacheMax {
		for k := range c.m { // evict an arbitrary entry
			delete(c.m, k)
			break
		}
	}
	c.m[name] = cert
	return cert, nil
}

func (c *leafCache) mint(name string, now time.Time) (*tls.Certificate, error) {
	if c.ca.Leaf == nil || c.ca.PrivateKey == nil {
		return nil, errors.New("egress: no CA")
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	notAfter := now.Add(leafValidity)
	if notAfter.After(c.ca.Leaf.NotAfter) {
		notAfter = c.ca.Leaf.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber:   randomSerial(),
		Subject:        pkix.Name{CommonName: name},
		DNSNames:       []string{name},
		NotBefore:      now.Add(-time.Hour),
		NotAfter:       notAfter,
		KeyUsage:       x509.KeyUsageDigitalSignature,
		ExtKeyUsage:    []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		AuthorityKeyId: c.ca.Leaf.SubjectKeyId,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.ca.Leaf, &key.PublicKey, c.ca.PrivateKey)
	if err != nil {
		return nil, err
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &tls.Certificate{
		Certificate: [][]byte{der, c.ca.Certificate[0]},
		PrivateKey:  key,
		Leaf:        leaf,
	}, nil
}
