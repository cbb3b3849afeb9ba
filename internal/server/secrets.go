package server

import (
	"net/http"

	"github.com/paddock-sandbox/paddock/api"
)

func (s *Server) createSecret(w http.ResponseWriter, r *http.Request, owner string) error {
	var req api.CreateSecretRequest
	if err := decode(w, r, maxJSONBody, &req); err != nil {
		return err
	}
	sec, err := s.mgr.PutSecret(r.Context(), owner, secret(req))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, secretInfo(*sec))
	return nil
}

func (s *Server) listSecrets(w http.ResponseWriter, r *http.Request, owner string) error {
	secs, err := s.mgr.Secrets(r.Context(), owner)
	if err != nil {
		return err
	}
	out := api.ListSecretsResponse{Secrets: make([]api.Secret, 0, len(secs))}
	for _, sec := range secs {
		out.Secrets = append(out.Secrets, secretInfo(sec))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) deleteSecret(w http.ResponseWriter, r *http.Request, owner string) error {
	if err := s.mgr.DeleteSecret(r.Context(), owner, r.PathValue("name")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) updateNetwork(w http.ResponseWriter, r *http.Request, owner string) error {
	var req api.NetworkPolicy
	if err := decode(w, r, maxJSONBody, &req); err != nil {
		return err
	}
	rec, err := s.mgr.UpdateNetwork(r.Context(), owner, r.PathValue("id"), networkPolicy(req))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, toAPI(rec))
	return nil
}
