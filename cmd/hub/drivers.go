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

// providerDrivers are the drivers a start picks by provider (a start naming
// no profile): the simulator, registered once (driverBuilders), the
// built-in profile's own unless the profile file gave that name to
// another driver.
func providerDrivers(cfg RuntimeConfig, log *slog.Logger, profiles map[string]driver.Profile) (map[string]driver.Driver, error) {
	if pd, ok := profiles[profile.BuiltinSim]; ok && pd.Kind == profile.KindSim {
		return map[string]driver.Driver{profile.KindSim: pd.Driver}, nil
	}
	d, err := driverBuilders()[profile.KindSim](profile.Profile{Name: profile.BuiltinSim, Driver: profile.KindSim},
		profile.Env{ClarifyTimeout: cfg.ClarifyTimeout, Logger: log})
	if err != nil {
		return nil, err
	}
	return map[string]driver.Driver{profile.KindSim: d}, nil
}
