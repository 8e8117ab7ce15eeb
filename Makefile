# graphnode — see README.md. Targets: demo, test, bench, build.
GO      ?= go
PYTHON  ?= /usr/bin/python3
BIN     := bin/node
DEMO    := build/demo
export CGO_ENABLED ?= 0

.PHONY: all build demo test test-go vet bench clean

all: build

build:
	CGO_ENABLED=0 $(GO) build -trimpath -o $(BIN) ./cmd/node

# Until the cluster demo exists: generate a stochastic block model graph,
# partition it into 2 and describe the result.
demo: build
	rm -rf $(DEMO)
	$(BIN) gen sbm --nodes 200000 --seed 1 -o $(DEMO)/graph
	$(BIN) partition --input $(DEMO)/graph --format ogb --parts 2 --method random --seed 1 -o $(DEMO)/parts
	$(BIN) inspect $(DEMO)/parts --verify

vet:
	$(GO) vet ./...

test-go:
	CGO_ENABLED=1 $(GO) test -race -count=1 ./...

test: vet test-go

bench:
	CGO_ENABLED=1 $(GO) test -run='^$$' -bench=. -benchtime=2x ./...

clean:
	rm -rf bin build
