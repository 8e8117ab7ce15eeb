# graphnode — see README.md. Targets: demo, test, bench, build.
GO      ?= go
PYTHON  ?= /usr/bin/python3
BIN     := bin/node
DEMO    := build/demo
export CGO_ENABLED ?= 0

.PHONY: all build demo test test-go test-py python-deps vet bench clean

all: build

# The commit `node version` prints (with +modified for uncommitted
# changes to tracked files); empty outside a git checkout.
COMMIT  := $(shell git rev-parse --short=12 HEAD 2>/dev/null)
ifneq ($(COMMIT),)
COMMIT  := $(COMMIT)$(shell git diff --quiet HEAD -- 2>/dev/null || echo +modified)
endif

build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "-X main.commit=$(COMMIT)" -o $(BIN) ./cmd/node

# The embedded default: a two-node cluster on loopback over a generated
# stochastic block model graph, trained with the built-in GraphSAGE
# trainer (node demo --help lists the flags: a real dataset, sizes).
demo: build
	$(BIN) demo

# vet also fails on Go files that gofmt would change, and names them.
vet:
	$(GO) vet ./...
	@unformatted=$$("$$($(GO) env GOROOT)/bin/gofmt" -l $$(git ls-files --cached --others --exclude-standard '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$unformatted" ]; then echo "gofmt -w needed on:"; echo "$$unformatted"; exit 1; fi

test-go:
	CGO_ENABLED=1 $(GO) test -race -count=1 ./...

# The Python client's tests need Debian's python3-torch and python3-numpy
# for /usr/bin/python3: installed here when missing (as root), otherwise
# the exact command to run is printed.
python-deps:
	@$(PYTHON) -c 'import torch, numpy' 2>/dev/null || { \
	  if [ "$$(id -u)" = 0 ]; then \
	    echo "installing python3-torch python3-numpy (apt-get)"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3 python3-torch python3-numpy; \
	  else \
	    echo "make test needs Debian's python3-torch and python3-numpy; run:"; \
	    echo "  sudo apt-get install -y python3-torch python3-numpy"; \
	    exit 1; \
	  fi; }

test-py: python-deps
	$(PYTHON) -m unittest discover -s python/tests -t python

test: vet test-go test-py

bench:
	CGO_ENABLED=1 $(GO) test -run='^$$' -bench=. -benchtime=2x ./...

clean:
	rm -rf bin build
