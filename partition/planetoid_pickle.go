package partition

import (
	"encoding/binary"
	"fmt"
)

// The Planetoid files are Python 2 pickles of protocol 2. This is a
// decoder for the opcodes and classes they use, and nothing else: a
// pickle is a program for a stack machine that may call any Python
// global, so a general unpickler in a data loader is a risk and a Go one
// would have to guess at classes. Here every global is checked against
// the few the files name, and an object is only a record of its class,
// arguments and state; the typed readers below (pickleCSR, pickleInt32s,
// pickleAdjacency) check shapes, dtypes and indices.
//
// A scipy csr_matrix, as the files hold it (x, tx, allx):
//
//	PROTO 2
//	GLOBAL 'scipy.sparse.csr csr_matrix'  EMPTY_TUPLE  NEWOBJ
//	EMPTY_DICT  MARK
//	  'format' 'csr'   '_shape' (rows, cols)   'maxprint' 50
//	  '_cs_matrix__has_sorted_indices' True
//	  'indptr' / 'indices' / 'data'  <ndarray>
//	SETITEMS  BUILD  STOP
//
// a numpy ndarray (y, ty, ally, and the three arrays above):
//
//	GLOBAL 'numpy.core.multiarray _reconstruct'
//	  (GLOBAL 'numpy ndarray', (0,), 'b')  REDUCE
//	MARK 1 (shape...) <dtype> False <BINSTRING raw little-endian bytes> TUPLE  BUILD
//	dtype: GLOBAL 'numpy dtype' ('i4' | 'f4', 0, 1) REDUCE
//	       MARK 3 '<' None None None -1 -1 0 TUPLE  BUILD
//
// and the graph, a collections.defaultdict(list):
//
//	GLOBAL 'collections defaultdict' (GLOBAL '__builtin__ list',) REDUCE
//	MARK  key [neighbours...]  key [...] ...  SETITEMS ...
//
// Memory: every opcode reads at least one byte and pushes at most one
// value, strings are slices of the input, and the memo is a map keyed by
// the index the file gives; so the decoded values are a small multiple of
// the input's size, whatever lengths or indices it states.

// Pickle opcodes of protocol 2 that the Planetoid files use, and the
// siblings a writer picks for other sizes (LONG_BINGET, SETITEM).
const (
	pkMark           = '('
	pkStop           = '.'
	pkProto          = 0x80
	pkGlobal         = 'c'
	pkBinput         = 'q'
	pkLongBinput     = 'r'
	pkBinget         = 'h'
	pkLongBinget     = 'j'
	pkNone           = 'N'
	pkNewTrue        = 0x88
	pkNewFalse       = 0x89
	pkBinint         = 'J'
	pkBinint1        = 'K'
	pkBinint2        = 'M'
	pkShortBinstring = 'U'
	pkBinstring      = 'T'
	pkEmptyTuple     = ')'
	pkTuple          = 't'
	pkTuple1         = 0x85
	pkTuple2         = 0x86
	pkTuple3         = 0x87
	pkEmptyList      = ']'
	pkAppend         = 'a'
	pkAppends        = 'e'
	pkEmptyDict      = '}'
	pkSetitem        = 's'
	pkSetitems       = 'u'
	pkReduce         = 'R'
	pkNewobj         = 0x81
	pkBuild          = 'b'
)

// The globals a Planetoid pickle may name.
const (
	pyReconstruct = "numpy.core.multiarray _reconstruct"
	pyNDArray     = "numpy ndarray"
	pyDtype       = "numpy dtype"
	pyCSR         = "scipy.sparse.csr csr_matrix"
	pyDefaultDict = "collections defaultdict"
	pyList        = "__builtin__ list"
)

// Values on the pickle machine's stack: nil (None), bool, int64, pyStr,
// *pyTuple, *pyListV, *pyDict, pyGlobal, *pyObject.
type (
	pyStr    []byte // a Python 2 str: bytes, a slice of the input
	pyTuple  []any
	pyListV  struct{ items []any }
	pyGlobal string // "module name", one of the constants above
	pyDict   struct {
		items   []pyItem
		factory pyGlobal // pyList for a defaultdict(list), "" for a dict
	}
	pyItem struct{ key, val any }
	// pyObject is an instance of cls made by REDUCE or NEWOBJ with args,
	// and given state by BUILD.
	pyObject struct {
		cls   pyGlobal
		args  pyTuple
		state any
		built bool
	}
)

// pyKind names a value's Python type for an error message (never its
// contents: a list may hold itself).
func pyKind(v any) string {
	switch v := v.(type) {
	case nil:
		return "None"
	case bool:
		return "bool"
	case int64:
		return "int"
	case pyStr:
		return "str"
	case *pyTuple, pyTuple:
		return "tuple"
	case *pyListV:
		return "list"
	case *pyDict:
		if v.factory != "" {
			return "defaultdict"
		}
		return "dict"
	case pyGlobal:
		return "global " + string(v)
	case *pyObject:
		return string(v.cls) + " object"
	}
	return fmt.Sprintf("%T", v)
}

// unpickle runs the pickle in data and returns the value STOP leaves.
// Errors say what is wrong and at which byte offset; the caller adds the
// file's name.
func unpickle(data []byte) (any, error) {
	var (
		stack []any
		marks []int
		memo  = map[uint32]any{}
		pos   int
	)
	fail := func(at int, format string, args ...any) error {
		return fmt.Errorf("pickle offset %d: %s", at, fmt.Sprintf(format, args...))
	}
	take := func(n int) ([]byte, bool) {
		if n < 0 || len(data)-pos < n {
			return nil, false
		}
		b := data[pos : pos+n]
		pos += n
		return b, true
	}
	pop := func() (any, bool) {
		floor := 0
		if len(marks) > 0 {
			floor = marks[len(marks)-1]
		}
		if len(stack) <= floor {
			return nil, false
		}
		v := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		return v, true
	}
	popMark := func() ([]any, bool) {
		if len(marks) == 0 {
			return nil, false
		}
		m := marks[len(marks)-1]
		marks = marks[:len(marks)-1]
		items := stack[m:len(stack):len(stack)]
		stack = stack[:m]
		return items, true
	}
	for {
		at := pos
		opb, ok := take(1)
		if !ok {
			return nil, fail(at, "truncated: no STOP")
		}
		op := opb[0]
		// args reads an opcode's fixed-size argument.
		arg := func(n int) ([]byte, error) {
			b, ok := take(n)
			if !ok {
				return nil, fail(at, "truncated: opcode 0x%02x wants %d bytes, %d left", op, n, len(data)-pos)
			}
			return b, nil
		}
		switch op {
		case pkProto:
			b, err := arg(1)
			if err != nil {
				return nil, err
			}
			if at != 0 || b[0] != 2 {
				return nil, fail(at, "PROTO %d: want protocol 2, first", b[0])
			}
		case pkStop:
			if len(marks) > 0 {
				return nil, fail(at, "STOP inside a MARK")
			}
			if len(stack) != 1 {
				return nil, fail(at, "STOP with %d values on the stack, want 1", len(stack))
			}
			if pos != len(data) {
				return nil, fail(at, "%d bytes after STOP", len(data)-pos)
			}
			return stack[0], nil
		case pkMark:
			marks = append(marks, len(stack))
		case pkGlobal:
			var name [2][]byte
			for i := range name {
				end := -1
				for j := pos; j < len(data); j++ {
					if data[j] == '\n' {
						end = j
						break
					}
				}
				if end < 0 {
					return nil, fail(at, "truncated: GLOBAL without its newline")
				}
				name[i] = data[pos:end]
				pos = end + 1
			}
			g := pyGlobal(string(name[0]) + " " + string(name[1]))
			switch g {
			case pyReconstruct, pyNDArray, pyDtype, pyCSR, pyDefaultDict, pyList:
			default:
				return nil, fail(at, "global %q.%q: not one a Planetoid file names", name[0], name[1])
			}
			stack = append(stack, g)
		case pkBinput, pkLongBinput:
			n := 1
			if op == pkLongBinput {
				n = 4
			}
			b, err := arg(n)
			if err != nil {
				return nil, err
			}
			if len(stack) == 0 {
				return nil, fail(at, "memo put on an empty stack")
			}
			memo[leUint(b)] = stack[len(stack)-1]
		case pkBinget, pkLongBinget:
			n := 1
			if op == pkLongBinget {
				n = 4
			}
			b, err := arg(n)
			if err != nil {
				return nil, err
			}
			v, ok := memo[leUint(b)]
			if !ok {
				return nil, fail(at, "memo get %d: never put", leUint(b))
			}
			stack = append(stack, v)
		case pkNone:
			stack = append(stack, nil)
		case pkNewTrue, pkNewFalse:
			stack = append(stack, op == pkNewTrue)
		case pkBinint:
			b, err := arg(4)
			if err != nil {
				return nil, err
			}
			stack = append(stack, int64(int32(binary.LittleEndian.Uint32(b))))
		case pkBinint1, pkBinint2:
			n := 1
			if op == pkBinint2 {
				n = 2
			}
			b, err := arg(n)
			if err != nil {
				return nil, err
			}
			stack = append(stack, int64(leUint(b)))
		case pkShortBinstring, pkBinstring:
			n := 1
			if op == pkBinstring {
				n = 4
			}
			b, err := arg(n)
			if err != nil {
				return nil, err
			}
			size := int64(leUint(b))
			if op == pkBinstring {
				size = int64(int32(leUint(b)))
			}
			if size < 0 || size > int64(len(data)-pos) {
				return nil, fail(at, "truncated: string of %d bytes, %d left", size, len(data)-pos)
			}
			s, _ := take(int(size))
			stack = append(stack, pyStr(s))
		case pkEmptyTuple:
			stack = append(stack, pyTuple{})
		case pkTuple1, pkTuple2, pkTuple3:
			n := int(op-pkTuple1) + 1
			floor := 0
			if len(marks) > 0 {
				floor = marks[len(marks)-1]
			}
			if len(stack)-floor < n {
				return nil, fail(at, "TUPLE%d with %d values above the mark", n, len(stack)-floor)
			}
			t := make(pyTuple, n)
			copy(t, stack[len(stack)-n:])
			stack = append(stack[:len(stack)-n], t)
		case pkTuple:
			items, ok := popMark()
			if !ok {
				return nil, fail(at, "TUPLE without MARK")
			}
			stack = append(stack, pyTuple(append([]any(nil), items...)))
		case pkEmptyList:
			stack = append(stack, &pyListV{})
		case pkEmptyDict:
			stack = append(stack, &pyDict{})
		case pkAppend, pkAppends:
			var items []any
			if op == pkAppend {
				v, ok := pop()
				if !ok {
					return nil, fail(at, "APPEND on an empty stack")
				}
				items = []any{v}
			} else if items, ok = popMark(); !ok {
				return nil, fail(at, "APPENDS without MARK")
			}
			l, ok := top(stack, marks)
			lv, isList := l.(*pyListV)
			if !ok || !isList {
				return nil, fail(at, "APPEND(S) to %s, not a list", pyKind(l))
			}
			lv.items = append(lv.items, items...)
		case pkSetitem, pkSetitems:
			var items []any
			if op == pkSetitem {
				v, ok1 := pop()
				k, ok2 := pop()
				if !ok1 || !ok2 {
					return nil, fail(at, "SETITEM wants a key and a value")
				}
				items = []any{k, v}
			} else if items, ok = popMark(); !ok {
				return nil, fail(at, "SETITEMS without MARK")
			}
			if len(items)%2 != 0 {
				return nil, fail(at, "SETITEMS with %d values, not key-value pairs", len(items))
			}
			d, ok := top(stack, marks)
			dv, isDict := d.(*pyDict)
			if !ok || !isDict {
				return nil, fail(at, "SETITEM(S) to %s, not a dict", pyKind(d))
			}
			for i := 0; i < len(items); i += 2 {
				switch items[i].(type) {
				case int64, pyStr:
				default:
					return nil, fail(at, "dict key of type %s: want int or str", pyKind(items[i]))
				}
				dv.items = append(dv.items, pyItem{items[i], items[i+1]})
			}
		case pkReduce, pkNewobj:
			a, ok1 := pop()
			c, ok2 := pop()
			if !ok1 || !ok2 {
				return nil, fail(at, "REDUCE/NEWOBJ wants a callable and its arguments")
			}
			args, isTuple := a.(pyTuple)
			cls, isGlobal := c.(pyGlobal)
			if !isTuple || !isGlobal {
				return nil, fail(at, "call of %s with %s: want a global and a tuple", pyKind(c), pyKind(a))
			}
			v, err := pyCall(cls, args, op == pkNewobj)
			if err != nil {
				return nil, fail(at, "%v", err)
			}
			stack = append(stack, v)
		case pkBuild:
			state, ok1 := pop()
			o, ok2 := top(stack, marks)
			obj, isObj := o.(*pyObject)
			if !ok1 || !ok2 || !isObj {
				return nil, fail(at, "BUILD of %s: want an object made by REDUCE or NEWOBJ", pyKind(o))
			}
			if obj.built {
				return nil, fail(at, "BUILD of %s a second time", pyKind(obj))
			}
			obj.state, obj.built = state, true
		default:
			return nil, fail(at, "opcode 0x%02x: not one a Planetoid file uses", op)
		}
	}
}

// top is the value on top of the stack, above the innermost mark.
func top(stack []any, marks []int) (any, bool) {
	floor := 0
	if len(marks) > 0 {
		floor = marks[len(marks)-1]
	}
	if len(stack) <= floor {
		return nil, false
	}
	return stack[len(stack)-1], true
}

// leUint is a little-endian unsigned integer of 1, 2 or 4 bytes.
func leUint(b []byte) uint32 {
	var v uint32
	for i := len(b) - 1; i >= 0; i-- {
		v = v<<8 | uint32(b[i])
	}
	return v
}

// pyCall is what REDUCE (or NEWOBJ) of cls on args makes; only the calls
// the Planetoid files hold are accepted.
func pyCall(cls pyGlobal, args pyTuple, newobj bool) (any, error) {
	switch {
	case newobj && cls == pyCSR && len(args) == 0:
		return &pyObject{cls: cls}, nil
	case !newobj && cls == pyReconstruct && len(args) == 3:
		// _reconstruct(ndarray, (0,), 'b'): an empty array that BUILD fills.
		if sub, ok := args[0].(pyGlobal); !ok || sub != pyNDArray {
			return nil, fmt.Errorf("_reconstruct of %s: want numpy ndarray", pyKind(args[0]))
		}
		return &pyObject{cls: pyNDArray, args: args}, nil
	case !newobj && cls == pyDtype && len(args) == 3:
		return &pyObject{cls: cls, args: args}, nil
	case !newobj && cls == pyDefaultDict && len(args) == 1:
		if f, ok := args[0].(pyGlobal); !ok || f != pyList {
			return nil, fmt.Errorf("defaultdict(%s): want defaultdict(list)", pyKind(args[0]))
		}
		return &pyDict{factory: pyList}, nil
	}
	call := "REDUCE"
	if newobj {
		call = "NEWOBJ"
	}
	return nil, fmt.Errorf("%s of %s with %d arguments: not a call a Planetoid file makes", call, cls, len(args))
}
