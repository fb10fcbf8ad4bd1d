# nncl - build the static and shared library, the tests, examples, bench and
# the single-file header. `make help` lists the targets.

PREFIX  ?= /usr/local
DESTDIR ?=
CC      ?= cc
B       ?= build
VERSION := 0.1.0
SONAME  := libnncl.so.0

# Optional parts: ZLIB=auto|1|0 (gzip data files), MPI=0|1 (multi-node).
ZLIB ?= auto
MPI  ?= 0
# SANITIZE=1 builds everything with AddressSanitizer and UBSan (into build-san).
SANITIZE ?= 0

WARN     := -Wall -Wextra -pedantic -Wshadow -Wno-overlength-strings
CSTD     := -std=c99
OPT      ?= -O2 -g
CPPFLAGS += -Iinclude -Isrc -I$(B)/gen -D_POSIX_C_SOURCE=200809L -DCL_TARGET_OPENCL_VERSION=120
CFLAGS   += $(CSTD) $(OPT) $(WARN) -fPIC -fvisibility=hidden -fopenmp -pthread
LIBS     := -lclblast -lOpenCL -lm -lpthread
LDFLAGS  += -fopenmp -pthread

ifeq ($(ZLIB),auto)
  ZLIB := $(shell printf '\#include <zlib.h>\nint main(void){return 0;}' | $(CC) -x c - -lz -o /dev/null 2>/dev/null && echo 1 || echo 0)
endif
ifeq ($(ZLIB),1)
  CPPFLAGS += -DNNCL_HAVE_ZLIB
  LIBS += -lz
endif
ifeq ($(MPI),1)
  CC := mpicc
  CPPFLAGS += -DNNCL_HAVE_MPI
endif
ifeq ($(SANITIZE),1)
  B := build-san
  CFLAGS += -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
  LDFLAGS += -fsanitize=address,undefined
endif

SRC      := $(sort $(wildcard src/*.c))
OBJ      := $(SRC:src/%.c=$(B)/obj/%.o)
CLSRC    := $(sort $(wildcard cl/*.cl))
TESTSRC  := $(sort $(wildcard tests/test_*.c))
TESTS    := $(TESTSRC:tests/%.c=$(B)/tests/%)
EXSRC    := $(sort $(wildcard examples/*.c))
EXAMPLES := $(EXSRC:examples/%.c=$(B)/examples/%)

.PHONY: all lib test check examples bench single install uninstall clean help fuzz
all: lib examples bench

lib: $(B)/libnncl.a $(B)/libnncl.so.$(VERSION)

$(B)/tools/embed: tools/embed.c
	@mkdir -p $(dir $@)
	$(CC) -std=c99 -O2 -Wall -Wextra -pedantic -o $@ $<

$(B)/gen/kernels.c: $(B)/tools/embed $(CLSRC)
	@mkdir -p $(dir $@)
	$(B)/tools/embed $@ $(CLSRC)

$(B)/obj/%.o: src/%.c src/internal.h include/nncl.h $(wildcard src/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -c -o $@ $<

$(B)/obj/kernels.o: $(B)/gen/kernels.c
	$(CC) $(CPPFLAGS) $(CFLAGS) -c -o $@ $<

$(B)/libnncl.a: $(OBJ) $(B)/obj/kernels.o
	rm -f $@
	ar rcs $@ $^

$(B)/libnncl.so.$(VERSION): $(OBJ) $(B)/obj/kernels.o
	$(CC) -shared -Wl,-soname,$(SONAME) $(LDFLAGS) -o $@ $^ $(LIBS)
	ln -sf libnncl.so.$(VERSION) $(B)/$(SONAME)
	ln -sf $(SONAME) $(B)/libnncl.so

$(B)/tests/harness.o: tests/harness.c tests/harness.h include/nncl.h
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -c -o $@ $<

$(B)/tests/%: tests/%.c $(B)/tests/harness.o $(B)/libnncl.a tests/harness.h
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -o $@ $< $(B)/tests/harness.o $(B)/libnncl.a $(LDFLAGS) $(LIBS)

$(B)/examples/%: examples/%.c $(B)/libnncl.a
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -o $@ $< $(B)/libnncl.a $(LDFLAGS) $(LIBS)

examples: $(EXAMPLES)

# Builds the tests and runs them on every OpenCL device present.
test: lib $(TESTS)
	@B=$(B) sh tests/run.sh

clean:
	rm -rf build build-san dist

help:
	@echo "make            library, examples and bench"
	@echo "make test       build and run the tests on every device present"
	@echo "make install    PREFIX=/usr/local DESTDIR="
	@echo "make single     dist/nncl.h, the single-file header"
	@echo "options: ZLIB=auto|0|1  MPI=0|1  SANITIZE=0|1  CC=..."
