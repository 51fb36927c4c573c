package main

import (
	"log/slog"

	"github.com/runhub/runhub/adapter/driver"
	"github.com/runhub/runhub/adapter/execdrv"
	"github.com/runhub/runhub/adapter/hermes"
	"github.com/runhub/runhub/adapter/openai"
	"github.com/runhub/runhub/adapter/profile"
	"github.com/runhub/runhub/adapter/sim"
)

// driverBuilders maps each driver kind a profile may name to the builder of
// its driver. Both `hub serve` and `hub runner` build their drivers here, so
// a profile works in either execution mode.
func driverBuilders() map[string]profile.Builder {
	return map[string]profile.Builder{
		profile.KindSim: func(p profile.Profile, env profile.Env) (driver.Driver, error) {
			return &sim.Driver{ClarifyTimeout: env.ClarifyTimeout}, nil
		},
		profile.KindOpenAI: openai.FromProfile,
		profile.KindExec:   execdrv.FromProfile,
		profile.KindHermes: hermes.FromProfile,
	}
}

// loadProfiles loads the profile file (RUNHUB_PROFILES) and builds one
// driver per profile.
func loadProfiles(cfg RuntimeConfig, log *slog.Logger) (*profile.Config, map[string]driver.Profile, error) {
	profiles, err := profile.Load(cfg.Profiles)
	if err != nil {
		return nil, nil, err
	}
	drivers, err := profiles.Build(driverBuilders(), profile.Env{ClarifyTimeout: cfg.ClarifyTimeout, Logger: log})
	if err != nil {
		return nil, nil, err
	}
	return profiles, drivers, nil
}
