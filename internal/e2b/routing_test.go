package e2b

import (
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestTarget(t *testing.T) {
	s := &Server{cfg: Config{Domain: "e2b.example"}}
	for _, tc := range []struct {
		name    string
		host    string
		hdr     map[string]string
		id      string
		port    int
		ok, err bool
	}{
		{"control plane", "api.e2b.example", nil, "", 0, false, false},
		{"headers", "paddock:3000", map[string]string{"E2b-Sandbox-Id": "sbabc"}, "sbabc", EnvdPort, true, false},
		{"headers and port", "x", map[string]string{"E2b-Sandbox-Id": "sbabc", "E2b-Sandbox-Port": "8000"}, "sbabc", 8000, true, false},
		{"bad header port", "x", map[string]string{"E2b-Sandbox-Id": "sbabc", "E2b-Sandbox-Port": "70000"}, "", 0, false, true},
		{"bad header id", "x", map[string]string{"E2b-Sandbox-Id": "../etc"}, "", 0, false, true},
		{"host name", "49983-sbabc.e2b.example", nil, "sbabc", EnvdPort, true, false},
		{"host name with port", "8000-sbabc.E2B.example:443", nil, "sbabc", 8000, true, false},
		{"other domain", "8000-sbabc.evil.example", nil, "", 0, false, false},
		{"bad port label", "x8000-sbabc.e2b.example", nil, "", 0, false, false},
		{"bad id label", "8000-sb_abc.e2b.example", nil, "", 0, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/", nil)
			r.Host = tc.host
			for k, v := range tc.hdr {
				r.Header.Set(k, v)
			}
			id, port, ok, err := s.target(r)
			if (err != nil) != tc.err || ok != tc.ok || id != tc.id || port != tc.port {
				t.Fatalf("target = %q %d %v %v", id, port, ok, err)
			}
		})
	}
}

func sign(path, op, user, token string, exp int64) string {
	raw := fmt.Sprintf("%s:%s:%s:%s", path, op, user, token)
	if exp != 0 {
		raw += ":" + strconv.FormatInt(exp, 10)
	}
	sum := sha256.Sum256([]byte(raw))
	return url.QueryEscape("v1_" + strings.TrimRight(base64.StdEncoding.EncodeToString(sum[:]), "="))
}

func TestValidSignature(t *testing.T) {
	s := &Server{cfg: Config{TokenKey: []byte("0123456789abcdef")}}
	tok := s.accessToken("sbabc")
	future, past := time.Now().Add(time.Hour).Unix(), time.Now().Add(-time.Hour).Unix()
	for _, tc := range []struct {
		name, method, query string
		want                bool
	}{
		{"read", "GET", "path=/a&signature=" + sign("/a", "read", "", tok, 0), true},
		{"read as user", "GET", "path=/a&username=user&signature=" + sign("/a", "read", "user", tok, 0), true},
		{"write", "POST", "path=/a&signature=" + sign("/a", "write", "", tok, 0), true},
		{"read signature used to write", "POST", "path=/a&signature=" + sign("/a", "read", "", tok, 0), false},
		{"other path", "GET", "path=/b&signature=" + sign("/a", "read", "", tok, 0), false},
		{"other sandbox's token", "GET", "path=/a&signature=" + sign("/a", "read", "", s.accessToken("sbother"), 0), false},
		{"expiry", "GET", fmt.Sprintf("path=/a&signature_expiration=%d&signature=%s", future, sign("/a", "read", "", tok, future)), true},
		{"expired", "GET", fmt.Sprintf("path=/a&signature_expiration=%d&signature=%s", past, sign("/a", "read", "", tok, past)), false},
		{"expiry stripped", "GET", "path=/a&signature=" + sign("/a", "read", "", tok, future), false},
		{"none", "GET", "path=/a", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(tc.method, "/files?"+tc.query, nil)
			if got := s.validSignature(r, "sbabc"); got != tc.want {
				t.Fatalf("validSignature = %v", got)
			}
		})
	}
}

func TestDiff(t *testing.T) {
	a := map[string]string{"/w/a": "file|1|t1", "/w/b": "file|1|t1", "/w/d/c": "file|1|t1"}
	b := map[string]string{"/w/a": "file|2|t2", "/w/d/c": "file|1|t1", "/w/new": "file|0|t3"}
	got := map[string]string{}
	for _, ev := range diff("/w", a, b) {
		got[ev.Name] = ev.Type
	}
	want := map[string]string{"a": "EVENT_TYPE_WRITE", "b": "EVENT_TYPE_REMOVE", "new": "EVENT_TYPE_CREATE"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("diff = %v", got)
	}
}

func TestMetadataFilter(t *testing.T) {
	for _, tc := range []struct {
		raw  string
		want map[string]string
	}{
		{"", nil},
		{"a=b", map[string]string{"a": "b"}},
		{"a=b%2520c&k%2526=v", map[string]string{"a": "b c", "k&": "v"}},
	} {
		got, err := metadataFilter(tc.raw)
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Fatalf("metadataFilter(%q) = %v, %v", tc.raw, got, err)
		}
	}
}

func TestEnvelope(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []byte
		code string
	}{
		{"truncated header", []byte{0, 0}, codeInvalidArgument},
		{"too large", []byte{0, 0xff, 0xff, 0xff, 0xff}, codeResourceExhausted},
		{"compressed", []byte{1, 0, 0, 0, 1, 'x'}, codeUnimplemented},
		{"truncated body", []byte{0, 0, 0, 0, 9, '{'}, codeInvalidArgument},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := readEnvelope(strings.NewReader(string(tc.in)))
			if e := toRPCError(err); e.Code != tc.code {
				t.Fatalf("err %v, want %s", err, tc.code)
			}
		})
	}
}
