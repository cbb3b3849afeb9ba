// Package kube is a small REST client for the Kubernetes API: JSON over
// HTTPS with a bearer token or a client certificate, configured from a
// kubeconfig file or from the pod's service account.
//
// Paddock needs four kinds of object (Leases, its Sandbox custom resource,
// Secrets, and the CRD itself at install time); k8s.io/client-go would pull
// in k8s.io/api and apimachinery (tens of modules, minutes of compile time
// on a 2-core CI machine, and the generated clientset) for that. The
// requests here are plain GET/POST/PUT/PATCH/DELETE on documented paths; the
// object types Paddock reads are declared in package cluster with only the
// fields it uses.
package kube

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// MaxResponseBytes bounds every response body read from the API server.
const MaxResponseBytes = 64 << 20

// Client talks to one API server. Its zero value is not usable; build it
// with Load or InCluster.
type Client struct {
	server string
	token  func() string
	hc     *http.Client
}

// StatusError is a non-2xx answer of the API server (a metav1.Status).
type StatusError struct {
	Code    int    `json:"code"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("kubernetes: %d %s: %s", e.Code, e.Reason, e.Message)
}

// IsNotFound reports whether err is a 404 from the API server.
func IsNotFound(err error) bool { return statusIs(err, http.StatusNotFound) }

// IsConflict reports whether err is a 409 (a stale resourceVersion or an
// object that already exists).
func IsConflict(err error) bool { return statusIs(err, http.StatusConflict) }

func statusIs(err error, code int) bool {
	var se *StatusError
	return errors.As(err, &se) && se.Code == code
}

func newClient(server string, tlsCfg *tls.Config, token func() string) *Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = tlsCfg
	tr.MaxIdleConnsPerHost = 16
	return &Client{server: strings.TrimRight(server, "/"), token: token,
		hc: &http.Client{Transport: tr, Timeout: 30 * time.Second}}
}

// Do sends method path with in (JSON-encoded unless nil) and decodes the
// answer into out (unless nil). contentType defaults to application/json.
func (c *Client) Do(ctx context.Context, method, path, contentType string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.server+path, body)
	if err != nil {
		return err
	}
	if contentType == "" {
		contentType = "application/json"
	}
	if in != nil {
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set("Accept", "application/json")
	if tok := c.token(); tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("kubernetes %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponseBytes+1))
	if err != nil {
		return fmt.Errorf("kubernetes %s %s: %w", method, path, err)
	}
	if len(b) > MaxResponseBytes {
		return fmt.Errorf("kubernetes %s %s: response over %d bytes", method, path, MaxResponseBytes)
	}
	if resp.StatusCode/100 != 2 {
		se := &StatusError{}
		if json.Unmarshal(b, se) != nil || se.Message == "" {
			se.Message = strings.TrimSpace(string(b[:min(len(b), 512)]))
		}
		se.Code = resp.StatusCode
		return fmt.Errorf("%s %s: %w", method, path, se)
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("kubernetes %s %s: decode: %w", method, path, err)
	}
	return nil
}

// Get, Create, Update, Delete and MergePatch are Do with the usual verbs.
func (c *Client) Get(ctx context.Context, path string, out any) error {
	return c.Do(ctx, http.MethodGet, path, "", nil, out)
}

// Create POSTs in to the collection path.
func (c *Client) Create(ctx context.Context, path string, in, out any) error {
	return c.Do(ctx, http.MethodPost, path, "", in, out)
}

// Update PUTs in (which carries its resourceVersion) to path.
func (c *Client) Update(ctx context.Context, path string, in, out any) error {
	return c.Do(ctx, http.MethodPut, path, "", in, out)
}

// MergePatch applies a JSON merge patch to path.
func (c *Client) MergePatch(ctx context.Context, path string, patch, out any) error {
	return c.Do(ctx, http.MethodPatch, path, "application/merge-patch+json", patch, out)
}

// Delete deletes path; a missing object is not an error.
func (c *Client) Delete(ctx context.Context, path string) error {
	err := c.Do(ctx, http.MethodDelete, path, "", nil, nil)
	if IsNotFound(err) {
		return nil
	}
	return err
}

func certPool(pemData []byte) (*x509.CertPool, error) {
	p := x509.NewCertPool()
	if !p.AppendCertsFromPEM(pemData) {
		return nil, errors.New("kubernetes: no certificate in the CA data")
	}
	return p, nil
}
