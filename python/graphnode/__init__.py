"""graphnode: the trainer-side client of a graphnode `node run`.

Loader opens a loader on the local node over its control socket
(docs/control.md), maps the shared-memory ring its samplers write
(shm/doc.go) and yields PyG-style mini-batches whose tensors view the
ring without a copy (sample/doc.go). OrigIds maps relabelled ids back to
the input graph's ids. KV reaches the cluster's parameter server
(sharded tables, server-side optimisers), Embedding wraps one of its
tables as a sparse embedding layer. NodeData reads the features and
labels of any node by global id (DGL's DistGraph.ndata).

Modules: ring / consumer (ring files), record (the batch record and its
decoder), batch (Batch and torch views), control (the socket protocol),
loader (Loader), origids (OrigIds), kv (KV, Embedding), nodedata
(NodeData), errors.
"""

from .batch import Batch, decode_batch, layer_sizes
from .errors import ControlError, CorruptError, EndOfStream, LoaderError, ProducerDeadError, VersionError
from .kv import KV, Embedding, KVError
from .loader import Loader
from .nodedata import NodeData, NodeDataError
from .origids import OrigIds
from .record import Record, decode_record

__all__ = [
    "Batch", "ControlError", "CorruptError", "Embedding", "EndOfStream", "KV", "KVError", "Loader", "LoaderError",
    "NodeData", "NodeDataError", "OrigIds", "ProducerDeadError", "Record", "VersionError", "decode_batch", "decode_record", "layer_sizes",
]
