package node

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"graphnode/mesh"
)

// CheckConfig is `node config check`: LoadConfig, then, as node run does
// at start but without serving, what the keys name on disk: graph.toml
// and this node's part file (node.parts; not with node.fetch, whose run
// fetches and checks them first), and with a mesh the certificate, key
// and CA (mesh.certs) and the CA's cluster (mesh.cluster). Each file is
// read whatever the problems of keys it does not depend on, and each of
// its problems is one more, prefixed with path and its key as the
// file's own are. An error that does not wrap ErrConfig is LoadConfig's
// (the file cannot be read as TOML).
//
// Warnings, each prefixed as a problem is, are what node run would refuse
// now but what the service manager makes as it starts the node: a
// control.socket directory under /run (CheckSocketDir), which a check
// before the first start, or while the unit is stopped, does not find;
// and what node run would refuse as the user running the check, who
// may not be the node's: a setgid socket directory of a group not
// theirs (checkSocketGroup).
func CheckConfig(path string) (cfg Config, warnings []string, err error) {
	cfg, err = LoadConfig(path)
	if err != nil && !errors.Is(err, ErrConfig) {
		return cfg, nil, err
	}
	all := unjoinAll(err)
	var p problems
	cfg.checkPartFiles(&p)
	cfg.checkCertFiles(&p)
	for _, e := range p {
		all = append(all, configError(path+": "+e.Error()))
	}
	for _, check := range []func() error{cfg.CheckSocketDir, cfg.checkSocketGroup} {
		if err := check(); err != nil {
			warnings = append(warnings, path+": "+err.Error())
		}
	}
	return cfg, warnings, errors.Join(all...)
}

// checkSocketGroup reports a control.socket that would take the group of
// a setgid directory this process may not give its files (control.group
// unset, control.mode letting the group connect): node run, as this
// user, refuses to start there (ringAccessOf). A warning, not a problem:
// the check may run as another user than the node's service.
func (c *Config) checkSocketGroup() error {
	if c.Control.Socket == "" || c.Control.Group != "" || c.RingMode()&0o060 == 0 {
		return nil
	}
	dir := filepath.Dir(c.Control.Socket)
	st, err := os.Stat(dir)
	if err != nil || st.Mode()&os.ModeSetgid == 0 {
		return nil
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok || mayGiveGroup(int(sys.Gid)) {
		return nil
	}
	return configError(fmt.Sprintf("control.socket: %q: its directory %s is setgid to group %d, which this user (uid %d, gid %d) is not in: "+
		"node run as this user would not start, as its rings could not have the socket's group; "+
		"add the node's user to group %d, or set [control] group to a group of the node's",
		c.Control.Socket, dir, sys.Gid, os.Geteuid(), os.Getegid(), sys.Gid))
}

// CheckSocketDir reports a control.socket whose directory under /run does
// not exist. Validate leaves it out: systemd makes it as it starts a unit
// of RuntimeDirectory= (deploy/systemd/graphnode.service) and removes it
// at stop. New refuses it; CheckConfig warns. A missing directory
// elsewhere is Validate's problem.
func (c *Config) CheckSocketDir() error {
	dir := filepath.Dir(c.Control.Socket)
	name := runtimeDirectory(dir)
	if c.Control.Socket == "" || name == "" || exists(dir) {
		return nil
	}
	return configError(fmt.Sprintf("control.socket: %q: directory %q does not exist, and node run starts only once it does: "+
		"systemd makes it as it starts a unit with RuntimeDirectory=%s (and removes it at stop); without such a unit, create it", c.Control.Socket, dir, name))
}

// runtimeDirectory is dir as a unit's RuntimeDirectory= names it (its
// path under /run), "" for a directory that is not under /run.
func runtimeDirectory(dir string) string {
	for _, root := range []string{"/run/", "/var/run/"} {
		if name, ok := strings.CutPrefix(filepath.Clean(dir), root); ok && name != "" {
			return name
		}
	}
	return ""
}

// unjoinAll is the problems of a LoadConfig error, none for nil.
func unjoinAll(err error) []error {
	if err == nil {
		return nil
	}
	return unjoin(err)
}

// checkPartFiles adds the problems of graph.toml and this node's part
// file to p, where node.parts, node.part and node.role are good enough
// for Validate to have passed them (else it said what is wrong, and
// the files would only repeat it).
func (c *Config) checkPartFiles(p *problems) {
	if c.Node.Fetch || c.Node.Parts == "" {
		return
	}
	if _, err := os.Stat(filepath.Join(c.Node.Parts, "graph.toml")); err != nil {
		return
	}
	switch c.Node.Role {
	case RoleServer:
		if n := numParts(c.Node.Parts); c.Node.Part < 0 || n > 0 && c.Node.Part >= n {
			return
		}
	case RoleClient:
		if c.Node.Part != 0 {
			return
		}
	default:
		return
	}
	if _, _, err := openManifest(c); err != nil {
		p.add("node.parts", "%v", errors.Unwrap(err))
	}
}

// checkCertFiles adds to p every problem of the certificate, key and CA
// of mesh.certs, and a CA of another cluster than mesh.cluster. They are
// read wherever mesh.certs is a directory and node.name a name, whatever
// else is wrong; a file missing there is Validate's problem already.
func (c *Config) checkCertFiles(p *problems) {
	if !c.MeshEnabled() || !isDir(c.Mesh.Certs) || mesh.CheckName("node", c.Node.Name) != nil {
		return
	}
	cluster, certProblems := mesh.CheckIdentity(c.Mesh.Certs, c.Node.Name)
	for _, e := range certProblems {
		if !errors.Is(e, fs.ErrNotExist) {
			p.add("mesh.certs", "%v", e)
		}
	}
	if cluster != "" && mesh.CheckName("cluster", c.Mesh.Cluster) == nil && cluster != c.Mesh.Cluster {
		p.add("mesh.cluster", "%q, but the CA in %s is of cluster %q", c.Mesh.Cluster, c.Mesh.Certs, cluster)
	}
}
