package main

import (
	"log/slog"

	"github.com/runhub/runhub/adapter/agui"
	"github.com/runhub/runhub/adapter/driver"
	"github.com/runhub/runhub/adapter/execdrv"
	"github.com/runhub/runhub/adapter/hermes"
	"github.com/runhub/runhub/adapter/openai"
	"github.com/runhub/runhub/adapter/profile"
	"github.com/runhub/runhub/adapter/sim"
)

// drivers are the driver kinds a profile may name, one line per driver:
// each package declares its kind, settings, capabilities and builder
// (docs/architecture.md, "Adding a driver"). Both `hub serve` and `hub
// runner` build their drivers from it, so a profile works in either
// execution mode.
func drivers() *profile.Registry {
	return profile.NewRegistry(
		sim.Registration(),
		openai.Registration(),
		execdrv.Registration(),
		hermes.Registration(),
		agui.Registration(),
	)
}

// loadedProfiles are the profile file's configuration, one driver per
// profile, and the drivers a start picks by provider (a start naming no
// profile): the simulator, the built-in profile's own unless the file
// gave that name to another driver.
type loadedProfiles struct {
	config    *profile.Config
	drivers   map[string]driver.Profile
	providers map[string]driver.Driver
}

// loadProfiles loads the profile file (RUNHUB_PROFILES) and builds its
// drivers.
func loadProfiles(cfg RuntimeConfig, log *slog.Logger) (loadedProfiles, error) {
	c, err := profile.Load(cfg.Profiles, drivers())
	if err != nil {
		return loadedProfiles{}, err
	}
	env := profile.Env{ClarifyTimeout: cfg.ClarifyTimeout, Logger: log}
	built, err := c.Build(env)
	if err != nil {
		return loadedProfiles{}, err
	}
	sd := built[profile.BuiltinSim].Driver
	if built[profile.BuiltinSim].Kind != sim.Kind {
		if sd, err = c.BuildKind(sim.Kind, env); err != nil {
			return loadedProfiles{}, err
		}
	}
	return loadedProfiles{config: c, drivers: built, providers: map[string]driver.Driver{sim.Kind: sd}}, nil
}
