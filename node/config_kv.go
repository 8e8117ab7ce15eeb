package node

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
	"golang.org/x/sys/unix"

	"graphnode/kv"
	"graphnode/node/control"
	"graphnode/partition"
	"graphnode/shm"
)

// DefaultKVSyncTimeout is [kv] sync_timeout when the file leaves it out.
const DefaultKVSyncTimeout = "60s"

// kvTimeoutMargin is what a mesh kv call waits beyond the sync timeout,
// so the shard, not the mesh, decides that a step failed.
const kvTimeoutMargin = 10 * time.Second

// KVConfig is [kv]: the parameter server's shards on this node. Tables
// are declared here (the same list on every node) or by trainers at run
// time (kv_create).
type KVConfig struct {
	// CheckpointDir receives every shard on kv_save and at shutdown; ""
	// disables checkpoints.
	CheckpointDir string `toml:"checkpoint_dir"`
	// Load restores tables from CheckpointDir: the declared ones at start,
	// the others when a trainer creates them. A missing file is an error.
	Load bool `toml:"load"`
	// SaveOnExit checkpoints at shutdown, after trainers stopped. Default
	// true (with a checkpoint_dir).
	SaveOnExit *bool `toml:"save_on_exit"`
	// SyncTimeout bounds a synchronous step from its first push.
	SyncTimeout string `toml:"sync_timeout"`
	// MaxMemory bounds the memory of this node's shards of all tables
	// together (weights and optimiser state), in the units of rings.size;
	// "" means the machine's memory and swap. A declared table past it
	// stops the node at start; one a trainer creates past it fails that
	// kv_create and nothing else.
	MaxMemory string              `toml:"max_memory"`
	Tables    []control.TableSpec `toml:"tables"`
}

// SyncTimeoutDuration is kv.sync_timeout parsed (Validate checked it).
func (c *Config) SyncTimeoutDuration() time.Duration {
	d, _ := time.ParseDuration(c.KV.SyncTimeout)
	return d
}

// kvMaxBytes is kv.max_memory parsed (Validate checked it), or the
// machine's memory and swap when it is not set.
func (c *Config) kvMaxBytes() uint64 {
	if c.KV.MaxMemory == "" {
		return MachineMemory()
	}
	n, _ := shm.ParseSize(c.KV.MaxMemory)
	return uint64(n)
}

// MachineMemory is this machine's memory plus swap in bytes, 0 when
// unknown. A cgroup may allow less, but never more: a need above this
// total cannot be met anywhere on the machine.
func MachineMemory() uint64 {
	var si unix.Sysinfo_t
	if err := unix.Sysinfo(&si); err != nil {
		return 0
	}
	return (uint64(si.Totalram) + uint64(si.Totalswap)) * uint64(si.Unit)
}

// kvCallTimeout bounds one kv call over the mesh.
func (c *Config) kvCallTimeout() time.Duration { return c.SyncTimeoutDuration() + kvTimeoutMargin }

// saveOnExit reports whether shutdown writes a checkpoint.
func (c *Config) saveOnExit() bool {
	return c.KV.CheckpointDir != "" && (c.KV.SaveOnExit == nil || *c.KV.SaveOnExit)
}

// validateKV adds [kv] problems to p.
func (c *Config) validateKV(p *problems) {
	k := &c.KV
	if c.Client() && (k.CheckpointDir != "" || k.Load || k.MaxMemory != "") {
		p.add("kv", "a client node (node.role = %q) holds no kv shards: checkpoint_dir, load and max_memory belong to the sampling nodes", RoleClient)
	}
	if d, err := time.ParseDuration(k.SyncTimeout); err != nil || d <= 0 || d > MaxMeshTimeout {
		p.add("kv.sync_timeout", "%q is not a duration in (0, %v] (like \"60s\")", k.SyncTimeout, MaxMeshTimeout)
	}
	if k.CheckpointDir != "" && !isDir(k.CheckpointDir) {
		p.add("kv.checkpoint_dir", "%q is not a directory", k.CheckpointDir)
	} else if k.CheckpointDir != "" {
		// Found by the first kv_save or the save at exit, after the
		// training it was to keep (a read-only remount, say). Permission
		// is left out: node config check may run as another user than
		// the node's.
		if err := unix.Access(k.CheckpointDir, unix.W_OK|unix.X_OK); errors.Is(err, unix.EROFS) {
			p.add("kv.checkpoint_dir", "%q cannot be written: %v (kv_save and the save at exit write there)", k.CheckpointDir, err)
		}
	}
	if k.MaxMemory != "" {
		if n, err := shm.ParseSize(k.MaxMemory); err != nil {
			p.add("kv.max_memory", "%q: %v", k.MaxMemory, err)
		} else if n <= 0 {
			p.add("kv.max_memory", "%q is not positive", k.MaxMemory)
		}
	}
	if k.Load && k.CheckpointDir == "" {
		p.add("kv.load", "true, but kv.checkpoint_dir is not set")
	}
	seen := map[string]bool{}
	tablesOK := true
	for i := range k.Tables {
		t := &k.Tables[i]
		key := fmt.Sprintf("kv.tables[%d]", i)
		if ps := t.Problems(); len(ps) > 0 {
			tablesOK = false
			// Name each field as this file does (kv.tables[0].mode),
			// not as a kv_create request would (table.mode).
			for _, ce := range ps {
				p.add(key+"."+strings.TrimPrefix(ce.Key, "table."), "%s", ce.Msg)
			}
			continue
		}
		if err := t.Validate(); err != nil { // fills the defaults; Problems found none
			p.add(key, "%v", err)
			continue
		}
		if seen[t.Name] {
			p.add(key+".name", "%q is declared twice", t.Name)
		}
		seen[t.Name] = true
		if err := kvSpecCheck(t); err != nil {
			tablesOK = false
			p.add(key, "%v", err)
		}
	}
	if !tablesOK || len(k.Tables) == 0 {
		return
	}
	// The tables' rows and memory against graph.toml, as the node sizes
	// them at start (newKVServer). Without a readable graph.toml (node.parts
	// says so, or fetch brings it) neither is checked.
	if m, err := partition.OpenManifest(c.Node.Parts); err == nil {
		num := manifestNumbering(m)
		c.checkKVRelations(p, num)
		c.checkKVMemory(p, m, num)
	}
}

// checkKVRelations adds a problem for each rows = "relations" table of
// [[kv.tables]] where graph.toml (of numbering num) lists no relations,
// which the node refuses at start (newKVServer), a client node too.
func (c *Config) checkKVRelations(p *problems, num numbering) {
	for i := range c.KV.Tables {
		if err := num.checkRows(&c.KV.Tables[i]); err != nil {
			p.add(fmt.Sprintf("kv.tables[%d].rows", i), "%v", err)
		}
	}
}

// checkKVMemory adds a problem when the shards of [[kv.tables]] on this
// node's part need more than kv.max_memory, sized as the node sizes them
// at start (newKVServer) from graph.toml m's partition book and numbering
// num; the node refused them, and config check said nothing.
func (c *Config) checkKVMemory(p *problems, m *partition.Manifest, num numbering) {
	max := c.kvMaxBytes()
	if c.Client() || max == 0 {
		return
	}
	book, err := m.Book()
	if err != nil || c.ownPart() < 0 || c.ownPart() >= book.Parts() {
		return
	}
	var need uint64
	for i := range c.KV.Tables {
		sp := resolveSpec(book, num, &c.KV.Tables[i])
		if b := sp.ShardBytes(c.ownPart()); b > math.MaxUint64-need {
			need = math.MaxUint64
		} else {
			need += b
		}
	}
	if need > max {
		p.add("kv.max_memory", "%q: the shards of [[kv.tables]] on part %d need %s: raise it, or shrink the tables", c.KV.MaxMemory, c.ownPart(), shm.ApproxSize(int64(min(need, math.MaxInt64))))
	}
}

// kvSpecCheck validates what kv checks of a spec, with placeholder bounds,
// and that a sync table's push fits a control frame (of a "nodes" or
// "relations" table, whose rows the graph gives, newKVServer checks that).
func kvSpecCheck(t *control.TableSpec) error {
	rows := t.Rows.N
	if t.Rows.Nodes || t.Rows.Relations {
		rows = 1
	}
	s := kvSpec(t, rows, kv.EvenBounds(rows, 1))
	if err := s.Validate(); err != nil {
		return err
	}
	return checkSyncPush(s)
}

// kvSpec turns a checked TableSpec into kv's Spec with the given shape.
func kvSpec(t *control.TableSpec, rows uint64, bounds []uint64) kv.Spec {
	s := kv.Spec{Name: t.Name, Rows: rows, Dim: t.Dim, Bounds: bounds,
		Init: kv.Init{Scale: float32(t.InitScale), Seed: t.InitSeed}}
	switch t.Init {
	case "uniform":
		s.Init.Kind = kv.InitUniform
	case "normal":
		s.Init.Kind = kv.InitNormal
	}
	switch t.Optimizer {
	case "sgd":
		s.Opt = kv.SGD(float32(t.LR))
	case "adagrad":
		s.Opt = kv.Adagrad(float32(t.LR), float32(t.Eps))
	case "adam":
		s.Opt = kv.Adam(float32(t.LR), float32(t.Beta1), float32(t.Beta2), float32(t.Eps))
	case "average":
		s.Opt = kv.Average()
	}
	s.Mode = kv.Async
	if t.Mode == "sync" {
		s.Mode = kv.Sync
	}
	return s
}

// explicitZeros refuses, in each [[kv.tables]] of text (the file at
// path), an eps, beta1 or beta2 given as 0, which Validate would replace
// by its default (control.TableSpec.ExplicitZero). Which keys a table
// gave is decoded from text again: Config does not keep it. Call it
// before Validate, which fills the defaults.
func explicitZeros(path, text string, c *Config) []error {
	var given struct {
		KV struct {
			Tables []map[string]toml.Primitive `toml:"tables"`
		} `toml:"kv"`
	}
	if _, err := toml.Decode(text, &given); err != nil {
		return nil // a wrong-typed [kv] is reported by the decoding itself
	}
	var problems []error
	for i, keys := range given.KV.Tables {
		if i >= len(c.KV.Tables) {
			break
		}
		err := c.KV.Tables[i].ExplicitZero(func(f string) bool {
			for k := range keys { // as the decoder matches keys: Beta1 = 0 is beta1's
				if strings.EqualFold(k, f) {
					return true
				}
			}
			return false
		})
		var ce *control.Error
		if errors.As(err, &ce) {
			field := strings.TrimPrefix(ce.Key, "table.")
			problems = append(problems, configError(fmt.Sprintf("%s: kv.tables[%d].%s: %s", path, i, field, ce.Msg)))
		}
	}
	return problems
}
