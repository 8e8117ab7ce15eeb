package node

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
	"golang.org/x/sys/unix"

	"graphnode/shm"
)

// ConfigVersion is the only `version` this build reads.
const ConfigVersion = 1

// Defaults filled in by Load before Validate (node.toml.example documents
// each one).
const (
	DefaultSocketMode   = "0660"
	DefaultRingDir      = "/dev/shm"
	DefaultRingSize     = "1GB"
	DefaultWorkers      = 2
	DefaultConcurrency  = 4
	DefaultMaxLoaders   = 16
	DefaultDrainTimeout = "10s"
	MaxWorkers          = 64
	MaxConcurrency      = 256
	// MaxSocketPath is the longest control.socket: sockaddr_un's 108
	// bytes less the terminating NUL.
	MaxSocketPath = 107
)

// ErrConfig is wrapped by every configuration problem.
var ErrConfig = errors.New("invalid configuration")

// ErrTransient is matched by a problem New finds that a later start may
// not have, though it is of a file a key names: a certificate not valid
// yet on a host whose clock is behind, a read that failed. Its text is
// the problem's alone.
var ErrTransient = errors.New("may pass at a later start")

// Config is node.toml. Tables for the cache, metrics and kv store will
// sit beside these, each owned by its package.
type Config struct {
	Version  int            `toml:"version"`
	Node     NodeConfig     `toml:"node"`
	Control  ControlConfig  `toml:"control"`
	Rings    RingsConfig    `toml:"rings"`
	Samplers SamplersConfig `toml:"samplers"`
	Mesh     MeshConfig     `toml:"mesh"`
	KV       KVConfig       `toml:"kv"`
	Metrics  MetricsConfig  `toml:"metrics"`
	Log      LogConfig      `toml:"log"`

	// fetchCmd: LoadFetchConfig read the file for `node fetch`, which
	// fetches whatever node.fetch says, so that a problem of fetching
	// names the command rather than a key the file may not have.
	fetchCmd bool
}

// MetricsConfig is [metrics]: the Prometheus text endpoint.
type MetricsConfig struct {
	// Listen is the TCP address of http://Listen/metrics ("127.0.0.1:9464");
	// "" (the default) serves none.
	Listen string `toml:"listen"`
}

// NodeConfig is [node]: which partition this host serves.
type NodeConfig struct {
	Parts string `toml:"parts"` // directory holding graph.toml
	Part  int    `toml:"part"`  // partition index served here (role "server")
	Name  string `toml:"name"`  // name in logs and stats; default: host name
	// Role is "server" (the default: serve part Part and sample it) or
	// "client" (server-client mode: serve trainers with loaders that the
	// nodes of [mesh.peers] sample; no part file, no samplers here).
	Role string `toml:"role"`
	// Fetch: before serving, read the files this node needs and does not
	// have (graph.toml, part-<part>/part.csr) from the peers of
	// [mesh.peers] that hold them (see Fetch).
	Fetch bool `toml:"fetch"`
	// Verify: check every section's CRC-32C of the part file before
	// serving (one read of the whole file). Without it the node checks
	// the header (and graph.toml its CRC) and the structure of the
	// sections it maps, and bit rot inside a section, such as in the
	// features, is served as it is.
	Verify bool `toml:"verify"`
}

// Node roles (node.role).
const (
	RoleServer = "server"
	RoleClient = "client"
)

// Client reports whether this node is a client node (node.role = "client").
func (c *Config) Client() bool { return c.Node.Role == RoleClient }

// ControlConfig is [control]: the trainer-facing Unix socket.
type ControlConfig struct {
	Socket string `toml:"socket"`
	Mode   string `toml:"mode"`  // octal permission bits of socket (rings: RingMode)
	Group  string `toml:"group"` // group name or gid of socket and rings; "" = the socket's as made (the node's, or its setgid directory's)
}

// RingsConfig is [rings]: where ring files live and how large they are.
type RingsConfig struct {
	Dir  string `toml:"dir"`
	Size string `toml:"size"` // default size of one loader's ring file ("1GB")
}

// SamplersConfig is [samplers]: sampler subprocess defaults and limits.
type SamplersConfig struct {
	Workers      int    `toml:"workers"`       // default sampler processes per loader
	Concurrency  int    `toml:"concurrency"`   // default batches in flight per sampler
	MaxLoaders   int    `toml:"max_loaders"`   // loaders open at once
	DrainTimeout string `toml:"drain_timeout"` // SIGTERM → SIGKILL grace for samplers
}

// LogConfig is [log].
type LogConfig struct {
	Level  string `toml:"level"`  // debug | info | warn | error
	Format string `toml:"format"` // text | json | auto (text on a terminal)
}

// DefaultConfig is the configuration of an empty file (less [node].parts
// and [control].socket, which have no default).
func DefaultConfig() Config {
	var c Config
	c.Version = ConfigVersion
	c.fillDefaults(func(string) bool { return false })
	return c
}

// fillDefaults sets every key that the file did not define. A key that is
// defined keeps its value, even a zero one, so that `workers = 0` is
// reported rather than silently replaced.
func (c *Config) fillDefaults(defined func(key string) bool) {
	str := func(key string, s *string, v string) {
		if !defined(key) && *s == "" {
			*s = v
		}
	}
	num := func(key string, n *int, v int) {
		if !defined(key) && *n == 0 {
			*n = v
		}
	}
	if !defined("node.name") {
		if h, err := os.Hostname(); err == nil {
			c.Node.Name = h
		}
	}
	str("node.role", &c.Node.Role, RoleServer)
	str("control.mode", &c.Control.Mode, DefaultSocketMode)
	str("rings.dir", &c.Rings.Dir, DefaultRingDir)
	str("rings.size", &c.Rings.Size, DefaultRingSize)
	str("samplers.drain_timeout", &c.Samplers.DrainTimeout, DefaultDrainTimeout)
	if c.Mesh.Listen == "" && !c.Client() {
		// What the node binds (MeshListen): this part's peers entry. A
		// "" given is filled too, since it means the same to the node.
		c.Mesh.Listen = c.MeshListen()
	}
	str("mesh.timeout", &c.Mesh.Timeout, DefaultMeshTimeout)
	num("mesh.retries", &c.Mesh.Retries, DefaultMeshRetries)
	str("kv.sync_timeout", &c.KV.SyncTimeout, DefaultKVSyncTimeout)
	if !defined("kv.save_on_exit") && c.KV.SaveOnExit == nil {
		c.KV.SaveOnExit = new(true) // takes effect with a checkpoint_dir
	}
	str("log.level", &c.Log.Level, "info")
	str("log.format", &c.Log.Format, "auto")
	num("samplers.workers", &c.Samplers.Workers, DefaultWorkers)
	num("samplers.concurrency", &c.Samplers.Concurrency, DefaultConcurrency)
	num("samplers.max_loaders", &c.Samplers.MaxLoaders, DefaultMaxLoaders)
}

// unknownKeyHint explains an unknown key that DESIGN.md describes but
// this build does not have, so that the error says more than "unknown".
func unknownKeyHint(k toml.Key) string {
	if len(k) == 1 && k[0] == "cache" {
		return ": this build has no [cache] table (no GPU tier for the hot-node cache); the cached rows of other parts come from each part file's cache section (node partition --cache-ratio) with no setting here"
	}
	return ""
}

// LoadConfig reads a node.toml, refuses unknown keys, fills defaults and
// validates. Every problem is reported, each on its own line prefixed
// with the file name; the Config is returned even when invalid so that
// `node config check` can print what it understood.
func LoadConfig(path string) (Config, error) { return loadConfig(path, false) }

// LoadFetchConfig is LoadConfig for `node fetch`: node.fetch is taken as
// true whatever the file says, so a missing graph.toml is no problem.
func LoadFetchConfig(path string) (Config, error) { return loadConfig(path, true) }

func loadConfig(path string, fetch bool) (Config, error) {
	var c Config
	b, err := os.ReadFile(path)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err // "open PATH: …" would name the file again
		}
		return c, fmt.Errorf("node: %s: %w", path, err)
	}
	text := string(b) // read once: every pass below decodes the same bytes
	md, err := toml.Decode(text, &c)
	if err == nil {
		// Decode puts a negative integer into an unsigned field (a kv
		// table's init_seed) as its two's complement, without a word;
		// decoding value by value refuses it.
		if d, derr := decodeValues(path, text, new(Config)); derr == nil && len(d.problems) > 0 {
			err = d.problems[0]
		}
	}
	var refused *valueDecoder // set when a value had the wrong type
	if err != nil {
		// Decode stops at the first value of the wrong type; decode the
		// file again value by value, so that every problem is reported.
		c = Config{}
		d, derr := decodeValues(path, text, &c)
		if derr != nil {
			return c, derr // not TOML at all
		}
		if len(d.problems) == 0 {
			return c, fmt.Errorf("node: %s: %w", path, err)
		}
		md, refused = d.md, d
	}
	c.Node.Fetch = c.Node.Fetch || fetch
	c.fetchCmd = fetch
	var problems []error
	unknown := md.Undecoded()
	if refused != nil {
		unknown = refused.unknown
	}
	for _, u := range indexUnknown(text, unknown) {
		problems = append(problems, configError(fmt.Sprintf("%s: unknown key %q%s", path, u.name, unknownKeyHint(u.key))))
	}
	if refused != nil {
		problems = append(problems, refused.problems...)
	}
	twinProblems, twins := caseTwins(path, text)
	problems = append(problems, twinProblems...)
	// The decoder takes a key whatever its case (`Workers = 0` sets
	// samplers.workers): so does the question whether the file gave one,
	// or `Workers = 0` would be replaced by the default.
	if !isDefinedFold(md, "version") {
		problems = append(problems, configError(fmt.Sprintf("%s: version: missing (want version = %d)", path, ConfigVersion)))
		c.Version = ConfigVersion
	}
	c.fillDefaults(func(key string) bool { return isDefinedFold(md, strings.Split(key, ".")...) })
	problems = append(problems, explicitZeros(path, text, &c)...)
	if err := c.Validate(); err != nil {
		for _, p := range unjoin(err) {
			key, msg, _ := strings.Cut(p.Error(), ":")
			if refused != nil && refused.covers(key, msg) {
				continue // judged the zero left by a refused value
			}
			if slices.ContainsFunc(twins, func(t string) bool { return key == t || strings.HasPrefix(key, t+".") || strings.HasPrefix(key, t+"[") }) {
				continue // judged one of a key's two values, by chance
			}
			problems = append(problems, configError(path+": "+p.Error()))
		}
	}
	return c, errors.Join(problems...)
}

// unjoin splits an errors.Join result back into its parts.
func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// Validate reports every bad value, each naming its key and the value.
// Defaults must have been filled (LoadConfig does).
func (c *Config) Validate() error {
	var p problems
	if c.Version != ConfigVersion {
		p.add("version", "%d is not supported (want %d)", c.Version, ConfigVersion)
	}
	switch {
	case c.Node.Parts == "":
		p.add("node.parts", "missing: the directory holding graph.toml")
	default:
		_, err := os.Stat(filepath.Join(c.Node.Parts, "graph.toml"))
		switch {
		case c.fetchCmd && !c.MeshEnabled():
			p.add("mesh", "missing: node fetch reads the partition's files from the peers of [mesh] (certs, cluster, peers), and this file has none")
		case c.Node.Fetch && !c.MeshEnabled():
			p.add("node.fetch", "true, but there is no [mesh] (certs, cluster, peers) to fetch the partition's files from")
		case err != nil && !(c.Node.Fetch && errors.Is(err, fs.ErrNotExist)):
			p.add("node.parts", "%q: no graph.toml there (%v)", c.Node.Parts, errors.Unwrap(err))
		}
	}
	switch c.Node.Role {
	case RoleServer:
		if c.Node.Part < 0 {
			p.add("node.part", "%d is negative", c.Node.Part)
		}
	case RoleClient:
		if c.Node.Part != 0 {
			p.add("node.part", "%d: a client node (node.role = %q) serves no part; remove node.part", c.Node.Part, RoleClient)
		}
	default:
		p.add("node.role", "%q is not %q or %q", c.Node.Role, RoleServer, RoleClient)
	}
	switch dir := filepath.Dir(c.Control.Socket); {
	case c.Control.Socket == "":
		p.add("control.socket", "missing: the path of the control socket")
	case len(c.Control.Socket) > MaxSocketPath:
		// The kernel's sockaddr_un holds no more: the bind would fail
		// with "invalid argument" once the node has started.
		p.add("control.socket", "%q is %d bytes long, a Unix socket path at most %d; choose a shorter path", c.Control.Socket, len(c.Control.Socket), MaxSocketPath)
	case runtimeDirectory(dir) != "" && !exists(dir):
		// Made by the service manager as it starts the node, removed
		// at stop: CheckSocketDir's, at start (New) and in config check.
	case !isDir(dir):
		p.add("control.socket", "%q: directory %q does not exist", c.Control.Socket, dir)
	default:
		// A socket there is one a node left, or serves on (Run tells
		// which); anything else is the operator's and stays.
		if st, err := os.Lstat(c.Control.Socket); err == nil && st.Mode().Type() != fs.ModeSocket {
			p.add("control.socket", "%q exists and is not a socket (%s)", c.Control.Socket, fileKind(st.Mode()))
		}
	}
	if _, err := c.SocketMode(); err != nil {
		p.add("control.mode", "%v", err)
	}
	if _, err := c.GroupID(); err != nil {
		p.add("control.group", "%v", err)
	}
	if !isDir(c.Rings.Dir) {
		p.add("rings.dir", "%q is not a directory", c.Rings.Dir)
	} else if err := unix.Access(c.Rings.Dir, unix.W_OK|unix.X_OK); errors.Is(err, unix.EROFS) {
		// Else the node started and refused every open_loader, under
		// ring_size. Permission is left to New, as for
		// kv.checkpoint_dir: node config check may run as another user
		// than the node's.
		p.add("rings.dir", "%q cannot be written: %v (every loader's ring is created there)", c.Rings.Dir, err)
	}
	if n, err := shm.ParseSize(c.Rings.Size); err != nil {
		p.add("rings.size", "%q: %v", c.Rings.Size, err)
	} else if n <= 0 {
		p.add("rings.size", "%q is not positive", c.Rings.Size)
	} else if w := c.Samplers.Workers; w >= 1 && w <= MaxWorkers {
		// Whatever the batch, a sub-ring holds an error record: open_loader
		// refuses a ring whose sub-rings cannot (openLoader).
		least := roundUp(max(shm.RecordHeaderSize+maxControlRecord, shm.MinCapacity), shm.PageSize)
		if sub := n / int64(w) / shm.PageSize * shm.PageSize; sub < least {
			got := "nothing"
			if sub > 0 {
				got = shm.FormatSize(sub)
			}
			p.add("rings.size", "%q gives %s to each of the %d sub-rings (samplers.workers), less than one error record takes: "+
				"every loader that leaves ring_size to the node would be refused; at least %s", c.Rings.Size, got, w, shm.FormatSize(least*int64(w)))
		}
	}
	p.inRange("samplers.workers", c.Samplers.Workers, 1, MaxWorkers)
	p.inRange("samplers.concurrency", c.Samplers.Concurrency, 1, MaxConcurrency)
	p.inRange("samplers.max_loaders", c.Samplers.MaxLoaders, 1, 1<<16)
	if d, err := time.ParseDuration(c.Samplers.DrainTimeout); err != nil || d <= 0 || d > MaxDrainTimeout {
		p.add("samplers.drain_timeout", "%q is not a duration in (0, %v] (like \"10s\")", c.Samplers.DrainTimeout, MaxDrainTimeout)
	}
	c.validateMesh(&p)
	c.validateKV(&p)
	if l := c.Metrics.Listen; l != "" {
		if _, port, err := net.SplitHostPort(l); err != nil {
			p.add("metrics.listen", "%q is not host:port (%v)", l, err)
		} else if _, err := strconv.ParseUint(port, 10, 16); err != nil {
			p.add("metrics.listen", "%q: port %q is not a number from 0 to 65535", l, port)
		}
	}
	if _, err := ParseLevel(c.Log.Level); err != nil {
		p.add("log.level", "%q is not one of debug, info, warn, error", c.Log.Level)
	}
	switch c.Log.Format {
	case "text", "json", "auto":
	default:
		p.add("log.format", "%q is not one of text, json, auto", c.Log.Format)
	}
	return p.err()
}

// SocketMode parses control.mode: octal, never granting access to others.
func (c *Config) SocketMode() (os.FileMode, error) {
	m, err := strconv.ParseUint(c.Control.Mode, 8, 32)
	if err != nil || m > 0o777 {
		return 0, fmt.Errorf("%q is not an octal permission like \"0660\"", c.Control.Mode)
	}
	if m&0o007 != 0 {
		return 0, fmt.Errorf("%q grants access to others; use a group instead", c.Control.Mode)
	}
	if m&0o600 != 0o600 {
		return 0, fmt.Errorf("%q must let the owner read and write", c.Control.Mode)
	}
	return os.FileMode(m), nil
}

// GroupID resolves control.group to a gid; -1 when no group is set.
func (c *Config) GroupID() (int, error) {
	g := c.Control.Group
	if g == "" {
		return -1, nil
	}
	if id, err := strconv.Atoi(g); err == nil {
		if id < 0 {
			return 0, fmt.Errorf("gid %d is negative", id)
		}
		// A gid_t is 32 bits, and its all-ones value means "no change":
		// a larger number reached chown cut to 32 bits (another group),
		// or refused once the node had started.
		if id > math.MaxUint32-1 {
			return 0, fmt.Errorf("gid %d is out of range 0..%d", id, uint32(math.MaxUint32-1))
		}
		return id, nil
	}
	grp, err := user.LookupGroup(g)
	if err != nil {
		return 0, fmt.Errorf("%q: no such group", g)
	}
	return strconv.Atoi(grp.Gid)
}

// RingMode is the permission of ring files: 0660 when control.mode lets
// the socket's group connect (write), 0600 otherwise. A 0660 ring is
// given the group the socket has once bound (control.group, else the
// node's, or the socket directory's when that is setgid: Node reads it
// from the socket), so whoever may open a loader may map the ring
// open_loader names, and no one else: with rings 0600 whenever
// control.group was left out, a trainer of the node's group connected
// through the default 0660 socket and was refused its ring.
func (c *Config) RingMode() os.FileMode {
	if m, err := c.SocketMode(); err == nil && m&0o020 != 0 {
		return 0o660
	}
	return 0o600
}

// DrainTimeoutDuration is samplers.drain_timeout parsed (Validate checked it).
func (c *Config) DrainTimeoutDuration() time.Duration {
	d, _ := time.ParseDuration(c.Samplers.DrainTimeout)
	return d
}

// RingSizeBytes is rings.size parsed (Validate checked it).
func (c *Config) RingSizeBytes() int64 {
	n, _ := shm.ParseSize(c.Rings.Size)
	return int64(n)
}

// EncodeTOML writes the effective configuration as TOML, in a form that
// LoadConfig reads back to the same Config, with the same problems.
func (c *Config) EncodeTOML() ([]byte, error) {
	var b bytes.Buffer
	if err := toml.NewEncoder(&b).Encode(c); err != nil {
		return nil, fmt.Errorf("node: encode config: %w", err)
	}
	return b.Bytes(), nil
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

func isDir(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.IsDir()
}

// problems collects configuration problems, each naming its key.
type problems []error

func (p *problems) add(key, format string, a ...any) {
	*p = append(*p, configError(key+": "+fmt.Sprintf(format, a...)))
}

// configError is one problem: its text names the key and the value, and
// it matches ErrConfig with errors.Is.
type configError string

func (e configError) Error() string        { return string(e) }
func (e configError) Is(target error) bool { return target == ErrConfig }

// configCause marks an error of what a key names (a file it points at)
// as a configuration problem, its text unchanged: it matches ErrConfig
// and what it wraps with errors.Is.
type configCause struct{ error }

func (e configCause) Is(target error) bool { return target == ErrConfig }
func (e configCause) Unwrap() error        { return e.error }

// transientCause marks err as ErrTransient, its text unchanged.
type transientCause struct{ error }

func (e transientCause) Is(target error) bool { return target == ErrTransient }
func (e transientCause) Unwrap() error        { return e.error }

func (p *problems) inRange(key string, v, lo, hi int) {
	if v < lo || v > hi {
		p.add(key, "%d is out of range %d..%d", v, lo, hi)
	}
}

func (p problems) err() error { return errors.Join(p...) }

// ParseLevel maps a log.level value to a slog level.
func ParseLevel(s string) (slog.Level, error) {
	switch strings.ToLower(s) {
	case "debug":
		return slog.LevelDebug, nil
	case "info":
		return slog.LevelInfo, nil
	case "warn", "warning":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return 0, configError(fmt.Sprintf("node: log level %q is not one of debug, info, warn, error", s))
}
