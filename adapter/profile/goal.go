package profile

import (
	"cmp"
	"fmt"

	"github.com/runhub/runhub/adapter/driver"
)

// Goal budget: the default of goal_max_turns (Hermes Agent's
// DEFAULT_MAX_TURNS) and its bound.
const (
	DefaultGoalMaxTurns = 20
	MaxGoalMaxTurns     = 1000
)

// validateGoalBudget checks goal_max_turns.
func (p Profile) validateGoalBudget() error {
	if p.GoalMaxTurns < 0 || p.GoalMaxTurns > MaxGoalMaxTurns {
		return fmt.Errorf("profile %q: goal_max_turns must be between 0 (the default, %d) and %d", p.Name, DefaultGoalMaxTurns, MaxGoalMaxTurns)
	}
	return nil
}

// validateGoalJudges checks that every goal_judge names a profile of driver
// openai.
func (c *Config) validateGoalJudges() []error {
	var errs []error
	for _, name := range c.Names() {
		j := c.Profiles[name].GoalJudge
		if j == "" {
			continue
		}
		switch jp, ok := c.Profiles[j]; {
		case !ok:
			errs = append(errs, fmt.Errorf("profile %q: goal_judge: no profile named %q", name, j))
		case jp.Driver != KindOpenAI:
			errs = append(errs, fmt.Errorf("profile %q: goal_judge: profile %q has driver %s; a goal judge is an openai profile", name, j, jp.Driver))
		}
	}
	return errs
}

// resolveGoalJudges sets each built profile's goal judge: the driver of its
// goal_judge, else its own driver when that judges, else none.
func (c *Config) resolveGoalJudges(out map[string]driver.Profile) error {
	for _, name := range c.Names() {
		pd := out[name]
		judge := cmp.Or(c.Profiles[name].GoalJudge, name)
		j, ok := out[judge].Driver.(driver.GoalJudge)
		if !ok && judge != name {
			return fmt.Errorf("profile %q: goal_judge: the driver of profile %q cannot judge goals", name, judge)
		}
		pd.Judge = j // nil: neither its own judge nor a goal_judge
		out[name] = pd
	}
	return nil
}
