package jinja

// node is one AST node. The parser builds exactly the shapes the reference
// parser builds, so that precedence quirks (a test binds tighter than *, a
// filter tighter than a unary sign's operand chain) carry over.
type node interface{}

type (
	textNode struct{ s string } // template text and string literals
	intLit   struct {
		n   float64
		lit string // the digits, exact past int64
	}
	floatLit     struct{ n float64 }
	arrayLit     struct{ items []node }
	tupleLit     struct{ items []node }
	objectLit    struct{ keys, vals []node }
	identNode    struct{ name string }
	commentNode  struct{}
	breakNode    struct{}
	continueNode struct{}
	memberNode   struct {
		obj, prop node
		computed  bool
	}
	sliceNode struct{ start, stop, step node } // nil parts are absent
	callNode  struct {
		callee node
		args   []node
	}
	kwargNode struct {
		key string
		val node
	}
	spreadNode   struct{ arg node } // *args
	kwSpreadNode struct{ arg node } // **kwargs
	binaryNode   struct {
		op          string
		left, right node
	}
	unaryNode struct {
		op  string
		arg node
	}
	filterNode struct{ operand, filter node } // filter: identNode or callNode
	testNode   struct {
		operand node
		negate  bool
		name    string
	}
	selectNode  struct{ lhs, test node }
	ternaryNode struct{ cond, a, b node }
	ifNode      struct {
		test      node
		body, alt []node
	}
	forNode struct {
		loopvar        node // identNode or tupleLit
		iterable       node
		body, fallback []node
	}
	setNode struct {
		target, value node // value nil: block set
		body          []node
	}
	macroNode struct {
		name   string
		params []node // identNode or kwargNode
		body   []node
	}
	callBlockNode struct {
		call       *callNode
		callerArgs []node
		body       []node
	}
	filterBlockNode struct {
		filter node
		body   []node
	}
)
