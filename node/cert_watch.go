package node

import (
	"context"
	"log/slog"
	"time"
)

// certWarnBefore is how long before this node's certificate or the
// cluster CA ends the node starts saying so; certCheckEvery how often it
// looks.
const (
	certWarnBefore = 7 * 24 * time.Hour
	certCheckEvery = time.Hour
)

// watchCerts says, at start and every certCheckEvery until ctx ends, when
// this node's certificate or the cluster CA ends within certWarnBefore
// (a warning) or has ended (an error): a running node whose certificate
// expired said nothing, kept reporting itself ready, and only its peers
// refused it, when they redialled. The metric
// graphnode_mesh_cert_expiry_timestamp_seconds has the dates.
func (n *Node) watchCerts(ctx context.Context) {
	id := n.mesh.id
	if id == nil {
		return
	}
	every(ctx, certCheckEvery, func() {
		for which, end := range certExpiries(id) {
			logCertEnd(n.log, which, end, time.Now())
		}
	})
}

// logCertEnd logs what certificate which ("node", "ca"), ending at end,
// calls for at now, if anything.
func logCertEnd(log *slog.Logger, which string, end, now time.Time) {
	fix := "renew it with node cert add --force (where the CA key is) and restart this node"
	what := "this node's certificate"
	if which == "ca" {
		fix, what = "write new certificates for every node with node cert init --force", "the cluster CA"
	}
	switch left := end.Sub(now); {
	case left <= 0:
		log.Error(what+" has ended: peers refuse this node when they dial it or it dials them; "+fix, "not_after", end.Format(time.RFC3339))
	case left < certWarnBefore:
		log.Warn(what+" ends soon: "+fix, "not_after", end.Format(time.RFC3339), "left", left.Round(time.Minute).String())
	}
}
