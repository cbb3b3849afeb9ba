package console

import (
	"bytes"
	"embed"
	"io/fs"
	"net/http"
	"path"
	"regexp"
	"time"

	"github.com/paddock-sandbox/paddock/api"
)

// dist holds what `make build` writes from web/ (index.html and
// assets/*); in a tree where it has not run, only dist/.keep is there and
// the console answers a page that says so.
//
//go:embed all:dist
var dist embed.FS

// CSP is the Content-Security-Policy of every console page: nothing from
// another origin, no inline script, no framing. style-src allows inline
// styles because the terminal (xterm.js) writes its theme into a <style>
// element; no script can come from a style.
const CSP = "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; " +
	"connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// assetName is what an asset's file name may be.
var assetName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,100}$`)

// pageHeaders sets the headers of every page and asset.
func pageHeaders(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Security-Policy", CSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
	h.Set("Permissions-Policy", "camera=(), microphone=(), geolocation=()")
}

// notBuilt is the page of a binary built without the console's assets.
const notBuilt = `<!doctype html><title>Paddock console</title><p>The console's assets were not built into this paddockd: run <code>make build</code>.</p>`

func (h *Handler) serveIndex(w http.ResponseWriter, r *http.Request) {
	pageHeaders(w)
	w.Header().Set("Cache-Control", "no-cache")
	b, err := fs.ReadFile(dist, "dist/index.html")
	if err != nil {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Write([]byte(notBuilt))
		return
	}
	http.ServeContent(w, r, "index.html", time.Time{}, bytes.NewReader(b))
}

func (h *Handler) serveAsset(w http.ResponseWriter, r *http.Request) {
	pageHeaders(w)
	name := r.PathValue("name")
	if !assetName.MatchString(name) {
		writeErr(w, api.CodeNotFound, "no console asset "+name)
		return
	}
	b, err := fs.ReadFile(dist, path.Join("dist/assets", name))
	if err != nil {
		writeErr(w, api.CodeNotFound, "no console asset "+name)
		return
	}
	w.Header().Set("Cache-Control", "no-cache")
	http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(b))
}
