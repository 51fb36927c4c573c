package webhook

import (
	"encoding/json"
	"net/http"
	"strconv"
)

// MaxDeliveriesLimit bounds GET /v1/webhooks/deliveries?limit=.
const MaxDeliveriesLimit = 500

// DeliveriesHandler answers GET /v1/webhooks/deliveries?limit=N (default
// 50, 1 to 500): {"deliveries": [Delivery]}, this hub's most recent
// attempts, newest first. Guard it (the admin role): it names sessions and
// runs of every owner.
func (s *Sender) DeliveriesHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		limit := 50
		if v := r.URL.Query().Get("limit"); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > MaxDeliveriesLimit {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusBadRequest)
				_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{
					"code": "bad_request", "message": "limit: want 1 to " + strconv.Itoa(MaxDeliveriesLimit), "field": "limit"}})
				return
			}
			limit = n
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		_ = json.NewEncoder(w).Encode(struct {
			Deliveries []Delivery `json:"deliveries"`
		}{s.Deliveries(limit)})
	})
}
