package hermes

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"

	"github.com/runhub/runhub/adapter/driver"
	"github.com/runhub/runhub/protocol"
)

// errFound ends the scan of an orphan's events.
var errFound = errors.New("found")

// StopOrphan implements driver.OrphanStopper: a run a killed hub left
// going (start-up recovery ended it as interrupted) has its Hermes run,
// whose id start journaled, stopped with POST /v1/runs/{id}/stop within
// StopTimeout. Hermes answers 404 run_not_found for a run that already
// ended; that is no failure. Without a journaled id (the run never reached
// Hermes) there is nothing to stop.
func (d *Driver) StopOrphan(ctx context.Context, o driver.Orphan) error {
	log := d.cfg.Logger.With("driver", "hermes", "run_id", o.RunID)
	id, err := journaledID(ctx, o)
	if err != nil {
		return err
	}
	if id == "" {
		log.Debug("no Hermes run to stop for the interrupted run")
		return nil
	}
	log = log.With("hermes_run_id", id)
	if d.cfg.APIKeyEnv != "" && d.cfg.APIKey.Empty() {
		log.Warn("cannot stop the Hermes run of an interrupted run: the API key variable is not set", "variable", d.cfg.APIKeyEnv)
		return nil
	}
	sctx, cancel := context.WithTimeout(ctx, d.cfg.StopTimeout)
	defer cancel()
	err = d.c.call(sctx, http.MethodPost, "/v1/runs/"+url.PathEscape(id)+"/stop", struct{}{}, nil, nil)
	switch {
	case err == nil:
		log.Info("stopped the Hermes run a previous process left going")
	case statusOf(err) == http.StatusNotFound:
		log.Info("the Hermes run a previous process left had already ended", "answer", err.Error())
	default:
		log.Warn("could not stop the Hermes run a previous process left going", "err", err)
	}
	return nil
}

// journaledID is the Hermes run id the run's start journaled, or "" (the
// run never reached Hermes).
func journaledID(ctx context.Context, o driver.Orphan) (string, error) {
	var id string
	err := o.Events(ctx, func(e protocol.Envelope) error {
		if e.Type != protocol.EventProgress {
			return nil
		}
		var p protocol.ProgressPayload
		if json.Unmarshal(e.Payload, &p) == nil {
			if id = upstreamID(p.Text); id != "" {
				return errFound
			}
		}
		return nil
	})
	if err != nil && !errors.Is(err, errFound) {
		return "", err
	}
	return id, nil
}
