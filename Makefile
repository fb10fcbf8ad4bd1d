# nncl - build the static and shared library, the tests, examples, bench and
# the single-file header. `make help` lists the targets. Every file is found
# by wildcard: a new src/LAYER/*.c, cl/*.cl, tests/test_*.c, tests/test_*.sh,
# examples/*.c or bench/*.c is picked up without editing this file.

PREFIX       ?= /usr/local
DESTDIR      ?=
LIBDIR       ?= $(PREFIX)/lib
INCLUDEDIR   ?= $(PREFIX)/include
PKGCONFIGDIR ?= $(LIBDIR)/pkgconfig
B            ?= build
VERSION      := 0.1.0
SONAME       := libnncl.so.0

# Optional parts: ZLIB=auto|1|0 (gzip data files), MPI=0|1 (multi-node),
# OPENMP=1|0 (parallel host loops; without it the pragmas are ignored).
ZLIB   ?= auto
MPI    ?= 0
OPENMP ?= 1
# SANITIZE=1 builds everything with AddressSanitizer and UBSan (into build-san).
SANITIZE ?= 0

# CFLAGS, CPPFLAGS and LDFLAGS are the user's: they are added after ours, so
# `make CFLAGS=-O0` changes the optimisation without losing the rest.
CFLAGS   ?= -O2 -g
WARN     := -Wall -Wextra -pedantic -Wshadow -Wno-overlength-strings
NN_CPPFLAGS := -Iinclude -Isrc -D_POSIX_C_SOURCE=200809L -DCL_TARGET_OPENCL_VERSION=120
NN_CFLAGS   := -std=c99 $(WARN) -fPIC -fvisibility=hidden -pthread
NN_LDFLAGS  := -pthread
# Libraries the library needs; the same list goes to Libs.private of nncl.pc.
LIBS     := -lclblast -lOpenCL -lm -lpthread
DEPFLAGS  = -MMD -MP

ifeq ($(OPENMP),1)
  NN_CFLAGS  += -fopenmp
  NN_LDFLAGS += -fopenmp
endif
ifeq ($(MPI),1)
  # mpicc unless CC was chosen (then the MPI flags are added to it)
  ifeq ($(origin CC),default)
    CC := mpicc
  endif
  NN_CPPFLAGS += -DNNCL_HAVE_MPI $(shell mpicc --showme:compile 2>/dev/null)
  MPI_LIBS := $(shell mpicc --showme:link 2>/dev/null)
endif
ifeq ($(ZLIB),auto)
  # no '#' in the probe: GNU make 4.3 keeps the backslash of '\#' inside $(shell)
  ZLIB := $(shell echo 'int main(void){return zlibVersion() == 0;}' | \
            $(CC) -x c -include zlib.h - -lz -o /dev/null 2>/dev/null && echo 1 || echo 0)
endif
ifeq ($(ZLIB),1)
  NN_CPPFLAGS += -DNNCL_HAVE_ZLIB
  LIBS += -lz
endif
ifeq ($(SANITIZE),1)
  B := build-san
  NN_CFLAGS  += -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
  NN_LDFLAGS += -fsanitize=address,undefined
else
  # the shared library must name every library it needs (not possible under
  # clang's ASan, whose runtime lives in the executable)
  SO_LDFLAGS := -Wl,--no-undefined
endif

ALL_CPPFLAGS = $(NN_CPPFLAGS) $(CPPFLAGS)
ALL_CFLAGS   = $(NN_CFLAGS) $(CFLAGS)
ALL_LDFLAGS  = $(NN_LDFLAGS) $(LDFLAGS)
PC_LIBS_PRIVATE = $(LIBS) $(MPI_LIBS) $(if $(filter 1,$(OPENMP)),-fopenmp)

SRC      := $(sort $(wildcard src/*/*.c))
HDR      := $(sort $(wildcard src/*/*.h))
DEF      := $(sort $(wildcard src/*/*.def))
OBJ      := $(SRC:src/%.c=$(B)/obj/%.o) $(B)/gen/kernels.o
CLSRC    := $(sort $(wildcard cl/*.cl))
TESTSRC  := $(sort $(wildcard tests/test_*.c))
TESTS    := $(TESTSRC:tests/%.c=$(B)/tests/%)
EXSRC    := $(sort $(wildcard examples/*.c))
EXAMPLES := $(EXSRC:examples/%.c=$(B)/examples/%)
BENCHSRC := $(sort $(wildcard bench/*.c))
# the second, sanitized build of `make test`
SANB     := $(B)-san
# marks a folder as a build folder, so that `make clean` finds every one
STAMP    := $(B)/.nncl-build

.PHONY: all lib tests examples bench single test test-fast test-san check run demo \
        install uninstall clean help fuzz
all: lib examples bench

lib: $(B)/libnncl.a $(B)/libnncl.so.$(VERSION)

$(STAMP):
	@mkdir -p $(B)
	@touch $@
	@$(if $(filter 1,$(SANITIZE)),touch $(B)/.sanitize,rm -f $(B)/.sanitize)

# ------------------------------------------------------------ library

$(B)/tools/%: tools/%.c | $(STAMP)
	@mkdir -p $(dir $@)
	$(CC) -std=c99 -O2 -Wall -Wextra -pedantic -o $@ $<

$(B)/gen/kernels.c: $(B)/tools/embed $(CLSRC)
	@mkdir -p $(dir $@)
	$(B)/tools/embed $@ $(CLSRC)

$(B)/gen/kernels.o: $(B)/gen/kernels.c
	$(CC) $(ALL_CPPFLAGS) $(ALL_CFLAGS) -c -o $@ $<

$(B)/obj/%.o: src/%.c | $(STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CPPFLAGS) $(ALL_CFLAGS) $(DEPFLAGS) -c -o $@ $<

$(B)/libnncl.a: $(OBJ)
	rm -f $@
	$(AR) rcs $@ $^

$(B)/libnncl.so.$(VERSION): $(OBJ) tools/libnncl.map
	$(CC) -shared -Wl,-soname,$(SONAME) -Wl,--version-script=tools/libnncl.map $(SO_LDFLAGS) $(ALL_LDFLAGS) \
	    -o $@ $(OBJ) $(LIBS) $(MPI_LIBS)
	ln -sf libnncl.so.$(VERSION) $(B)/$(SONAME)
	ln -sf $(SONAME) $(B)/libnncl.so

# ------------------------------------------------------------ programs

$(B)/tests/harness.o: tests/harness.c | $(STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CPPFLAGS) $(ALL_CFLAGS) $(DEPFLAGS) -c -o $@ $<

$(B)/tests/%: tests/%.c $(B)/tests/harness.o $(B)/libnncl.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CPPFLAGS) $(ALL_CFLAGS) $(DEPFLAGS) -o $@ $< $(B)/tests/harness.o $(B)/libnncl.a \
	    $(ALL_LDFLAGS) $(LIBS) $(MPI_LIBS)

$(B)/examples/%: examples/%.c $(B)/libnncl.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CPPFLAGS) $(ALL_CFLAGS) $(DEPFLAGS) -o $@ $< $(B)/libnncl.a $(ALL_LDFLAGS) $(LIBS) $(MPI_LIBS)

# bench/*.c together make the one `bench` program (-ldl: it loads BLAS and
# NVML at run time, so it needs neither to build)
$(B)/bench/bench: $(BENCHSRC) $(wildcard bench/*.h) $(B)/libnncl.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CPPFLAGS) $(ALL_CFLAGS) $(DEPFLAGS) -o $@ $(BENCHSRC) $(B)/libnncl.a $(ALL_LDFLAGS) $(LIBS) $(MPI_LIBS) -ldl

tests: $(TESTS)
examples: $(EXAMPLES)
bench: $(if $(BENCHSRC),$(B)/bench/bench)

# ------------------------------------------------------------ single header

# dist/nncl.h: the public API, then under NNCL_IMPLEMENTATION
# src/runtime/internal.h, the other headers, every source file and the kernel
# table of tools/embed.c (.def lists are inlined wherever they are included).
single: dist/nncl.h
dist/nncl.h: $(B)/tools/amalgamate $(B)/gen/kernels.c include/nncl.h $(HDR) $(DEF) $(SRC)
	@mkdir -p dist
	$(B)/tools/amalgamate $@ include/nncl.h $(B)/gen/kernels.c \
	    $(filter src/runtime/internal.h,$(HDR)) $(filter-out src/runtime/internal.h,$(HDR)) $(DEF) $(SRC)

# ------------------------------------------------------------ tests

# `make test` runs the suite twice: as built, then built with AddressSanitizer
# and UBSan into $(B)-san; tests/run.sh ends with the total of both runs.
# test-fast and test-san run one of the two. The examples and the bench are
# built first, so that no test script builds while another pass runs beside
# it.
test: lib tests single examples bench
	@$(MAKE) --no-print-directory SANITIZE=1 B=$(SANB) lib tests examples bench
	@B="$(B) $(SANB)" CC="$(CC)" MAKE="$(MAKE)" sh tests/run.sh

test-fast: lib tests single examples bench
	@B="$(B)" CC="$(CC)" MAKE="$(MAKE)" sh tests/run.sh

test-san:
	@$(MAKE) --no-print-directory SANITIZE=1 B=$(SANB) lib tests single examples bench
	@B="$(SANB)" CC="$(CC)" MAKE="$(MAKE)" sh tests/run.sh

# The one command for the tests on a fresh Debian/Ubuntu machine: checks the
# packages (installing what is missing when root), then both test runs.
check:
	@sh tools/setup-debian.sh
	@$(MAKE) --no-print-directory test

# The main job: set up, build, train the Fashion-MNIST MLP on the default
# device (model, curve CSV and SVG land in the build folder).
run:
	@sh tools/setup-debian.sh
	@$(MAKE) --no-print-directory lib $(B)/examples/fashion_mnist_mlp
	cd $(B) && ./examples/fashion_mnist_mlp

# The device list and a GEMM check on every device.
demo:
	@sh tools/setup-debian.sh
	@$(MAKE) --no-print-directory lib $(B)/examples/devices
	$(B)/examples/devices --devices all

# ------------------------------------------------------------ install

# Installs the header, both libraries with their soname links, and nncl.pc
# (shared: `pkg-config --libs nncl`; static: `pkg-config --static --libs nncl`).
install: lib
	install -d $(DESTDIR)$(INCLUDEDIR) $(DESTDIR)$(LIBDIR) $(DESTDIR)$(PKGCONFIGDIR)
	install -m 644 include/nncl.h $(DESTDIR)$(INCLUDEDIR)/nncl.h
	install -m 644 $(B)/libnncl.a $(DESTDIR)$(LIBDIR)/libnncl.a
	install -m 755 $(B)/libnncl.so.$(VERSION) $(DESTDIR)$(LIBDIR)/libnncl.so.$(VERSION)
	ln -sf libnncl.so.$(VERSION) $(DESTDIR)$(LIBDIR)/$(SONAME)
	ln -sf $(SONAME) $(DESTDIR)$(LIBDIR)/libnncl.so
	printf '%s\n' 'prefix=$(PREFIX)' 'libdir=$(LIBDIR)' 'includedir=$(INCLUDEDIR)' '' \
	    'Name: nncl' 'Description: tensors and neural networks on any OpenCL device' \
	    'Version: $(VERSION)' 'Cflags: -I$${includedir}' 'Libs: -L$${libdir} -lnncl' \
	    'Libs.private: $(strip $(PC_LIBS_PRIVATE))' >$(DESTDIR)$(PKGCONFIGDIR)/nncl.pc
	chmod 644 $(DESTDIR)$(PKGCONFIGDIR)/nncl.pc

uninstall:
	rm -f $(DESTDIR)$(INCLUDEDIR)/nncl.h $(DESTDIR)$(PKGCONFIGDIR)/nncl.pc \
	    $(DESTDIR)$(LIBDIR)/libnncl.a $(DESTDIR)$(LIBDIR)/libnncl.so \
	    $(DESTDIR)$(LIBDIR)/$(SONAME) $(DESTDIR)$(LIBDIR)/libnncl.so.$(VERSION)

# ------------------------------------------------------------ clean

# Removes every build folder (those holding .nncl-build), dist/, test output
# and what the examples write when run from the source folder.
EXAMPLE_OUT := csv_classifier.safetensors xor.safetensors \
               $(foreach m,fashion_mnist_mlp fashion_mnist_cnn fashion_mnist_mobilenet fashion_mnist_resnet fashion_mnist_lstm char_gpt,\
                 $(m).safetensors $(m).csv $(m).svg) \
               fashion_mnist_autoencoder.safetensors fashion_mnist_autoencoder.svg
clean:
	rm -rf build build-san $(B) $(SANB) $(patsubst %/.nncl-build,%,$(wildcard */.nncl-build)) dist tests/out
	rm -f $(EXAMPLE_OUT)

help:
	@echo "make              library, examples and bench into $(B)/"
	@echo "make lib          the static and shared library only"
	@echo "make examples     the example programs ($(B)/examples/)"
	@echo "make bench        the bench program ($(B)/bench/bench)"
	@echo "make run          set up (Debian/Ubuntu), build and run the main job"
	@echo "make demo         set up, list every OpenCL device and check a GEMM on each"
	@echo "make check        set up, then make test"
	@echo "make test         build and run the tests, then again under ASan+UBSan"
	@echo "make test-fast    the tests once, without sanitizers"
	@echo "make test-san     the tests once, under ASan+UBSan (build-san/)"
	@echo "make single       dist/nncl.h, the single-file header"
	@echo "make install      PREFIX=$(PREFIX) DESTDIR=$(DESTDIR) (also LIBDIR, INCLUDEDIR, PKGCONFIGDIR)"
	@echo "make uninstall    the same variables"
	@echo "make fuzz         the libFuzzer targets (clang) into build/fuzz/"
	@echo "make fuzz-run     run each for FUZZ_SECONDS on its seeds"
	@echo "make clean        remove every build folder, dist/ and the examples' output files"
	@echo "options: ZLIB=auto|0|1  MPI=0|1  OPENMP=1|0  SANITIZE=0|1  CC=...  B=folder"

-include $(wildcard $(B)/obj/*/*.d $(B)/tests/*.d $(B)/examples/*.d $(B)/bench/*.d)

# ------------------------------------------------------------ fuzzing

# tests/fuzz/fuzz_<name>.c are libFuzzer targets (LLVMFuzzerTestOneInput);
# a new one needs no edit here. `make fuzz` builds each with clang, ASan and
# UBSan against an archive of the library sources built the same way
# (build/fuzz/libnncl-fuzz.a) into build/fuzz/<name>; `make fuzz-run`
# runs each for FUZZ_SECONDS on its seeds in tests/fuzz/corpus/<name>/ (new
# inputs go to build/fuzz/corpus/<name>/, crashes to build/fuzz/<name>-*;
# tests/fuzz/<name>.dict is used when present). The suite replays the seeds
# without libFuzzer: test_fuzz_corpus links every target, renamed.
FUZZ_CC      ?= clang
FUZZ_SECONDS ?= 20
FUZZ_B       := build/fuzz
FUZZSRC      := $(sort $(wildcard tests/fuzz/fuzz_*.c))
FUZZNAMES    := $(FUZZSRC:tests/fuzz/%.c=%)
FUZZ_CFLAGS  := -std=c99 -g -O1 -pthread -fno-omit-frame-pointer -fsanitize=address,undefined \
                -fno-sanitize-recover=undefined $(if $(filter 1,$(OPENMP)),-fopenmp)
FUZZ_OBJ     := $(SRC:src/%.c=$(FUZZ_B)/obj/%.o) $(FUZZ_B)/obj/kernels.o
REPLAY_OBJ   := $(FUZZNAMES:%=$(B)/fuzz-replay/%.o)

.PHONY: fuzz-run
fuzz: $(FUZZNAMES:%=$(FUZZ_B)/%)

$(FUZZ_B)/libnncl-fuzz.a: $(FUZZ_OBJ)
	rm -f $@
	$(AR) rcs $@ $^

$(FUZZ_B)/obj/%.o: src/%.c include/nncl.h $(HDR) $(DEF)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(ALL_CPPFLAGS) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -c -o $@ $<

$(FUZZ_B)/obj/kernels.o: $(B)/gen/kernels.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(ALL_CPPFLAGS) $(FUZZ_CFLAGS) -c -o $@ $<

$(FUZZ_B)/%: tests/fuzz/%.c $(FUZZ_B)/libnncl-fuzz.a include/nncl.h
	$(FUZZ_CC) $(ALL_CPPFLAGS) $(FUZZ_CFLAGS) -fsanitize=fuzzer -o $@ $< $(FUZZ_B)/libnncl-fuzz.a \
	    $(LIBS) $(MPI_LIBS)

fuzz-run: fuzz
	@for n in $(FUZZNAMES); do \
	    mkdir -p $(FUZZ_B)/corpus/$$n tests/fuzz/corpus/$$n; \
	    dict=; [ -f tests/fuzz/$$n.dict ] && dict=-dict=tests/fuzz/$$n.dict; \
	    echo "== $$n: $(FUZZ_SECONDS) s"; \
	    $(FUZZ_B)/$$n -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 $$dict \
	        -artifact_prefix=$(FUZZ_B)/$$n- $(FUZZ_B)/corpus/$$n tests/fuzz/corpus/$$n || exit 1; \
	done

# The list of targets, rewritten only when it changes.
$(B)/gen/fuzz_targets.h: nncl-fuzz-list-force | $(STAMP)
	@mkdir -p $(dir $@)
	@for n in $(FUZZNAMES); do echo "NNCL_FUZZ_TARGET($$n)"; done >$@.tmp
	@cmp -s $@.tmp $@ || mv $@.tmp $@; rm -f $@.tmp
nncl-fuzz-list-force:

$(B)/fuzz-replay/%.o: tests/fuzz/%.c include/nncl.h | $(STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CPPFLAGS) $(ALL_CFLAGS) -DLLVMFuzzerTestOneInput=nncl_fuzz_replay_$* -c -o $@ $<

$(B)/tests/test_fuzz_corpus: tests/test_fuzz_corpus.c $(B)/gen/fuzz_targets.h $(REPLAY_OBJ) \
                             $(B)/tests/harness.o $(B)/libnncl.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CPPFLAGS) -I$(B)/gen $(ALL_CFLAGS) -o $@ $< $(REPLAY_OBJ) $(B)/tests/harness.o \
	    $(B)/libnncl.a $(ALL_LDFLAGS) $(LIBS) $(MPI_LIBS)
