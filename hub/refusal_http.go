package hub

import (
	"errors"
	"net/http"

	"github.com/crewlet/hub/authority"
)

// writeRefusal answers a refusal with its class, its sentence and the
// HTTP status the class reads as; anything else is the node's own fault,
// logged and answered in the one sentence such faults get.
func (f *operator) writeRefusal(w http.ResponseWriter, err error, event string) {
	var ref *authority.Refusal
	if !errors.As(err, &ref) {
		f.log.Error(event, "error", err.Error())
		writeJSON(w, http.StatusInternalServerError, map[string]string{"class": string(authority.InternalError), "error": authority.InternalErrorSentence})
		return
	}
	status := authority.HTTPStatus(ref.Class)
	if status == http.StatusInternalServerError {
		f.log.Error(event, "error", err.Error())
	}
	body := map[string]any{"class": string(ref.Class), "error": ref.Sentence}
	if len(ref.Data) > 0 {
		body["data"] = ref.Data
	}
	writeJSON(w, status, body)
}
