package server

import (
	"io"
	"net/http"
	"time"

	"github.com/paddock-sandbox/paddock/api"
)

// drainTimeout bounds how long drainBody waits for the rest of a body.
const drainTimeout = 10 * time.Second

// drainBody reads what is left of a request's body (at most
// api.MaxJSONBodyBytes, within drainTimeout) once its handler returned and
// before the answer leaves: routes that take no body (pause, resume,
// delete, a 401 or 404) then answer only after the body arrived. Without
// it, a request with "Connection: close" whose body comes in a later write
// finds the socket closed by net/http (which does not read the body of a
// connection it closes) and the client sees a reset instead of the answer.
func drainBody(w http.ResponseWriter, r *http.Request) {
	if r.Body == nil || r.Body == http.NoBody || r.Header.Get("Upgrade") != "" {
		return
	}
	rc := http.NewResponseController(w)
	if rc.SetReadDeadline(time.Now().Add(drainTimeout)) != nil {
		return // hijacked, or no deadline to bound the wait
	}
	io.CopyN(io.Discard, r.Body, api.MaxJSONBodyBytes)
	rc.SetReadDeadline(time.Time{})
}
