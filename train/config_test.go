package train

import (
	"errors"
	"math"
	"strings"
	"testing"
)

func validConfig() Config {
	c := DefaultConfig()
	c.FeatDim, c.Classes = 8, 3
	return c
}

func TestConfigValidate(t *testing.T) {
	if c := validConfig(); c.Validate() != nil {
		t.Fatalf("default config: %v", c.Validate())
	}
	for _, c := range []struct {
		key string
		set func(*Config)
	}{
		{"feat_dim", func(c *Config) { c.FeatDim = 0 }},
		{"classes", func(c *Config) { c.Classes = 1 }},
		{"layers", func(c *Config) { c.Layers = 4 }},
		{"hidden", func(c *Config) { c.Hidden = 0 }},
		{"dropout", func(c *Config) { c.Dropout = 1 }},
		{"input_dropout", func(c *Config) { c.InputDropout = -0.1 }},
		{"lr", func(c *Config) { c.LR = math.NaN() }},
		{"weight_decay", func(c *Config) { c.WeightDecay = -1 }},
		{"beta1", func(c *Config) { c.Beta1 = 1 }},
		{"beta2", func(c *Config) { c.Beta2 = -0.5 }},
		{"eps", func(c *Config) { c.Eps = 0 }},
		{"epochs", func(c *Config) { c.Epochs = 0 }},
		{"eval_every", func(c *Config) { c.EvalEvery = -1 }},
		{"patience", func(c *Config) { c.Patience = -2 }},
		{"rank", func(c *Config) { c.Rank = -1 }},
		{"threads", func(c *Config) { c.Threads = -1 }},
	} {
		cfg := validConfig()
		c.set(&cfg)
		err := cfg.Validate()
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.key+" ") {
			t.Errorf("%s: %v, want an ErrInvalid naming the key", c.key, err)
		}
	}
	// Every problem is reported, not the first.
	cfg := validConfig()
	cfg.Hidden, cfg.Epochs, cfg.LR = 0, 0, 0
	err := cfg.Validate()
	for _, key := range []string{"hidden", "epochs", "lr"} {
		if err == nil || !strings.Contains(err.Error(), key+" ") {
			t.Errorf("joined error %v lacks %s", err, key)
		}
	}
}

func TestEvaluations(t *testing.T) {
	for _, c := range []struct {
		epochs, every int
		want          []int
	}{
		{4, 0, []int{3}}, // after the last only, as node kge --eval-every 0
		{4, 1, []int{0, 1, 2, 3}},
		{10, 3, []int{2, 5, 8, 9}},
		{6, 3, []int{2, 5}},
		{2, 5, []int{1}},
	} {
		cfg := validConfig()
		cfg.Epochs, cfg.EvalEvery = c.epochs, c.every
		var got []int
		for e := range c.epochs {
			if cfg.Evaluates(e) {
				got = append(got, e)
			}
		}
		if len(got) != len(c.want) || cfg.Evaluations() != len(c.want) {
			t.Errorf("epochs %d every %d: evaluates %v (%d), want %v", c.epochs, c.every, got, cfg.Evaluations(), c.want)
			continue
		}
		for i := range got {
			if got[i] != c.want[i] {
				t.Errorf("epochs %d every %d: evaluates %v, want %v", c.epochs, c.every, got, c.want)
			}
		}
	}
}

// TestConfigSyncLen: SyncLen, computed before New, is New's SyncLen, and
// saturates for a width whose model no machine holds (2^40: hidden² of
// a 3-layer model overflows an int).
func TestConfigSyncLen(t *testing.T) {
	for _, layers := range []int{2, 3} {
		c := validConfig()
		c.Layers, c.Hidden = layers, 5
		tr, err := New(c, NoSync{})
		if err != nil {
			t.Fatal(err)
		}
		if got, want := c.SyncLen(), tr.SyncLen(); got != want {
			t.Errorf("%d layers: Config.SyncLen %d, Trainer.SyncLen %d", layers, got, want)
		}
	}
	c := validConfig()
	c.Layers, c.Hidden = 3, 1<<40
	if got := c.SyncLen(); got != math.MaxInt {
		t.Errorf("hidden 2^40, 3 layers: SyncLen %d, want math.MaxInt", got)
	}
	c.Layers, c.Hidden = 2, 3_000_000_000
	// 8 features, 3 classes: 2·8·h + h + 2·h·3 + 3, and the statistics.
	if got, want := c.SyncLen(), 23*3_000_000_000+3+statsLen; got != want {
		t.Errorf("hidden 3e9, 2 layers: SyncLen %d, want %d", got, want)
	}
}
