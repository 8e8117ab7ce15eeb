package node

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/BurntSushi/toml"

	"graphnode/mesh"
)

// Mesh defaults (node.toml.example documents each).
const (
	DefaultMeshTimeout = "10s"
	DefaultMeshRetries = mesh.DefaultRetries
	// MaxMeshTimeout bounds mesh.timeout: it is also how long a trainer
	// may wait for the error of a peer that went down.
	MaxMeshTimeout = 5 * time.Minute
	// MaxDrainTimeout bounds samplers.drain_timeout, as the mesh's
	// timeouts are: deploy/systemd's unit kills the node 5 minutes after
	// SIGTERM (TimeoutStopSec), and a longer drain would only be cut.
	MaxDrainTimeout = 5 * time.Minute
)

// MeshConfig is [mesh]: how this node reaches the other partitions'
// nodes. A partition set of one part needs none.
type MeshConfig struct {
	Listen  string     `toml:"listen"`  // UDP host:port served; default: this part's peers entry
	Certs   string     `toml:"certs"`   // directory of ca.crt, <node.name>.crt and .key
	Cluster string     `toml:"cluster"` // the cluster name of the CA (node cert init --cluster)
	Timeout string     `toml:"timeout"` // one mesh call, retries included
	Retries int        `toml:"retries"` // retries of a call after a transient failure
	Peers   []MeshPeer `toml:"peers"`   // one per part; this node's own entry is allowed
}

// MeshPeer is one [[mesh.peers]] entry: the node serving a part.
type MeshPeer struct {
	Part int    `toml:"part"`
	Name string `toml:"name"` // its certificate's name (node cert init --nodes)
	Addr string `toml:"addr"` // UDP host:port
}

// configured reports whether any [mesh] key that has no default is set.
func (m *MeshConfig) configured() bool {
	return m.Listen != "" || m.Certs != "" || m.Cluster != "" || len(m.Peers) > 0
}

// numParts reads `parts` from dir/graph.toml; 0 when it cannot (the
// directory is checked in full when the node opens it).
func numParts(dir string) int {
	var m struct {
		Parts int `toml:"parts"`
	}
	if _, err := toml.DecodeFile(filepath.Join(dir, "graph.toml"), &m); err != nil {
		return 0
	}
	return m.Parts
}

// validateMesh adds [mesh] problems to p. A set of more than one part
// needs the whole table; a set of one needs none, but a table that is
// there is checked.
func (c *Config) validateMesh(p *problems) {
	m := &c.Mesh
	parts := numParts(c.Node.Parts)
	if !c.Client() && parts > 0 && c.Node.Part >= parts {
		p.add("node.part", "%d, but %s holds %d partitions", c.Node.Part, c.Node.Parts, parts)
	}
	if d, err := time.ParseDuration(m.Timeout); err != nil || d <= 0 || d > MaxMeshTimeout {
		p.add("mesh.timeout", "%q is not a duration in (0, %v] (like \"10s\")", m.Timeout, MaxMeshTimeout)
	}
	if m.Retries < 0 || m.Retries > 100 {
		p.add("mesh.retries", "%d is out of range 0..100", m.Retries)
	}
	if !c.Client() && parts <= 1 && !m.configured() {
		return
	}
	if c.Client() && !m.configured() {
		p.add("mesh", "missing: a client node (node.role = %q) reaches the sampling nodes through [mesh] (certs, cluster, peers)", RoleClient)
		return
	}
	if !m.configured() {
		p.add("mesh", "missing: %s holds %d partitions, so this node needs [mesh] (listen, certs, cluster, peers) to reach the others",
			c.Node.Parts, parts)
		return
	}
	// The name picks the certificate files and this node's peers entry:
	// past a bad one, "no .crt there" and "this node is """ only repeat
	// the problem.
	nameErr := mesh.CheckName("node", c.Node.Name)
	if nameErr != nil {
		p.add("node.name", "%v (it names this node's certificate in mesh.certs)", nameErr)
	}
	nameOK := nameErr == nil
	if err := mesh.CheckName("cluster", m.Cluster); err != nil {
		p.add("mesh.cluster", "%v", err)
	}
	switch {
	case m.Certs == "":
		p.add("mesh.certs", "missing: the directory written by node cert init")
	case !isDir(m.Certs):
		p.add("mesh.certs", "%q is not a directory (node cert init writes it)", m.Certs)
	default:
		files := []string{filepath.Join(m.Certs, mesh.CAcertFile)}
		if nameOK {
			files = append(files, mesh.CertFile(m.Certs, c.Node.Name), mesh.KeyFile(m.Certs, c.Node.Name))
		}
		for _, f := range files {
			if _, err := os.Stat(f); err != nil {
				p.add("mesh.certs", "%q: no %s there (node cert init writes it)", m.Certs, filepath.Base(f))
			}
		}
	}
	c.validatePeers(p, parts, nameOK)
	if c.Client() {
		if m.Listen != "" {
			p.add("mesh.listen", "%q: a client node (node.role = %q) serves no part, so it listens on no mesh port; remove it", m.Listen, RoleClient)
		}
		return
	}
	if c.MeshListen() == "" {
		p.add("mesh.listen", "missing: the UDP address to serve on (or a mesh.peers entry for part %d)", c.Node.Part)
	} else if err := checkAddr(c.MeshListen()); err != nil {
		p.add("mesh.listen", "%q: %v", c.MeshListen(), err)
	} else {
		own := ""
		for _, e := range m.Peers {
			if e.Part == c.Node.Part {
				own = e.Addr
			}
		}
		for i, e := range m.Peers {
			// Peers dial it for that part: this node would be refused
			// there under its own name, or fail to bind on this host. (An
			// own entry of that address too is validatePeers' problem.)
			if e.Part != c.Node.Part && e.Addr == c.MeshListen() && e.Addr != own {
				p.add("mesh.listen", "%q is the address of part %d's node (mesh.peers[%d]), not of this node's part %d", e.Addr, e.Part, i, c.Node.Part)
				break
			}
		}
	}
}

// validatePeers adds the problems of mesh.peers to p; nameOK says
// whether node.name is a valid name, to be checked against them.
func (c *Config) validatePeers(p *problems, parts int, nameOK bool) {
	own := c.ownPart()
	seen := map[int]bool{}
	names, addrs := map[string]int{}, map[string]int{} // the first entry of each
	for i, e := range c.Mesh.Peers {
		key := fmt.Sprintf("mesh.peers[%d]", i)
		switch {
		case e.Part < 0 || parts > 0 && e.Part >= parts:
			p.add(key+".part", "%d is not a partition of the set (0..%d)", e.Part, parts-1)
		case seen[e.Part]:
			p.add(key+".part", "part %d listed twice", e.Part)
		}
		seen[e.Part] = true
		// One node serves one part, under its certificate's name and on
		// its own port: an entry copied without changing them would reach
		// another part's node, refused at run time only.
		if j, ok := names[e.Name]; ok && c.Mesh.Peers[j].Part != e.Part {
			p.add(key+".name", "%q serves part %d too (mesh.peers[%d]): each part has a node of its own", e.Name, c.Mesh.Peers[j].Part, j)
		} else if !ok {
			names[e.Name] = i
		}
		if j, ok := addrs[e.Addr]; ok && c.Mesh.Peers[j].Part != e.Part {
			p.add(key+".addr", "%q is part %d's too (mesh.peers[%d]): each part has a node of its own", e.Addr, c.Mesh.Peers[j].Part, j)
		} else if !ok {
			addrs[e.Addr] = i
		}
		if err := mesh.CheckName("node", e.Name); err != nil {
			p.add(key+".name", "%v", err)
		} else if nameOK && e.Part == own && e.Name != c.Node.Name {
			p.add(key+".name", "%q serves part %d, but this node (node.part) is %q", e.Name, e.Part, c.Node.Name)
		} else if nameOK && !c.Client() && e.Name == c.Node.Name && e.Part != own && own >= 0 && (parts == 0 || own < parts) {
			// This node would refuse the part's real node as one claiming
			// another's part, and dial it expecting its own certificate.
			// (A node.part out of range is said once, as such.)
			p.add(key+".name", "%q is this node (node.name), which serves part %d (node.part), not %d", e.Name, own, e.Part)
		} else if c.Client() && e.Name == c.Node.Name {
			// It would go by that node's certificate, and the peers take
			// its calls for that node's.
			p.add("node.name", "%q is the name of %s, the node of part %d: a client node needs a name and certificate of its own (node cert add --node NAME)", c.Node.Name, key, e.Part)
		}
		if err := checkAddr(e.Addr); err != nil {
			p.add(key+".addr", "%q: %v", e.Addr, err)
		}
	}
	for part := range parts {
		if part != own && !seen[part] {
			p.add("mesh.peers", "no entry for part %d (every other part needs part, name and addr)", part)
		}
	}
}

// checkAddr accepts "host:port" with a numeric port.
func checkAddr(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	if host == "" {
		return fmt.Errorf("no host (use 0.0.0.0 to serve on every interface)")
	}
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || n == 0 {
		return fmt.Errorf("port %q is not 1..65535", port)
	}
	return nil
}

// ownPart is the part this node serves, -1 for a client node.
func (c *Config) ownPart() int {
	if c.Client() {
		return -1
	}
	return c.Node.Part
}

// MeshEnabled reports whether this node joins a mesh.
func (c *Config) MeshEnabled() bool { return c.Mesh.configured() }

// MeshListen is the address the mesh server binds: mesh.listen, or this
// part's entry of mesh.peers (which LoadConfig fills in as mesh.listen,
// so that node config check prints it).
func (c *Config) MeshListen() string {
	if c.Mesh.Listen != "" {
		return c.Mesh.Listen
	}
	for _, e := range c.Mesh.Peers {
		if e.Part == c.ownPart() {
			return e.Addr
		}
	}
	return ""
}

// MeshTimeoutDuration is mesh.timeout parsed (Validate checked it).
func (c *Config) MeshTimeoutDuration() time.Duration {
	d, _ := time.ParseDuration(c.Mesh.Timeout)
	return d
}

// meshPeers are the other parts' nodes, for mesh.ClientConfig.Peers.
func (c *Config) meshPeers() map[int]mesh.Peer {
	out := make(map[int]mesh.Peer, len(c.Mesh.Peers))
	for _, e := range c.Mesh.Peers {
		if e.Part != c.ownPart() {
			out[e.Part] = mesh.Peer{Name: e.Name, Addr: e.Addr}
		}
	}
	return out
}

// meshOwners names the node of every part, this node's included
// (mesh.ServerConfig.Owners).
func (c *Config) meshOwners() map[int]string {
	out := make(map[int]string, len(c.Mesh.Peers))
	for _, e := range c.Mesh.Peers {
		out[e.Part] = e.Name
	}
	return out
}

// meshRetries maps mesh.retries to mesh.ClientConfig.Retries (whose 0
// means the default and a negative value none).
func (c *Config) meshRetries() int {
	if c.Mesh.Retries == 0 {
		return -1
	}
	return c.Mesh.Retries
}
