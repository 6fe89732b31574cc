# Makefile - builds the mlxcel binary, the unit-test runner, the sanitizer build and fuzzers.
#
#   make                 build/mlxcel (release, -Werror)
#   make test-unit       unit tests (release build)
#   make asan            build/asan/mlxcel-tests + build/asan/mlxcel under ASan+UBSan
#   make fuzz            build/fuzz/fuzz_* (clang libFuzzer + ASan + UBSan)
#   make arm64           build/arm64/: the same, cross-compiled for AArch64 (aarch64-linux-gnu-gcc and
#                        the arm64 multiarch -dev packages, see scripts/setup.sh); NEON kernels chosen
#                        at run time; scripts/test_arm64.sh runs its kernel tests under qemu-aarch64
#   BUILD=dir            put objects elsewhere (parallel work trees)

CC      ?= cc
BUILD   ?= build
VERSION := $(shell cat VERSION 2>/dev/null || echo 0.0.0)

WARN    := -Wall -Wextra -Wpedantic -Werror -Wshadow -Wstrict-prototypes -Wno-unused-parameter
CSTD    := -std=c17 -D_GNU_SOURCE -DMXL_VERSION=\"$(VERSION)\"
INC     := -Isrc
OPT     ?= -O2 -g
CFLAGS_ALL = $(CSTD) $(WARN) $(INC) $(OPT) -pthread -MMD -MP $(EXTRA_CFLAGS)
LDLIBS  := -lcurl -lcrypto -lmicrohttpd -ljansson -lpcre2-8 -lutf8proc -ljpeg -lpng -lwebpdemux -lwebp -lgif -lm -lpthread

LIB_SRC  := $(shell find src -name '*.c' ! -path 'src/cli/*' | sort)
CLI_SRC  := $(shell find src/cli -name '*.c' | sort)
TEST_SRC := $(shell find tests/unit -name '*.c' | sort)
FUZZ_SRC := $(shell find tests/fuzz -name 'fuzz_*.c' 2>/dev/null | sort)

LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/obj/%.o)
CLI_OBJ  := $(CLI_SRC:%.c=$(BUILD)/obj/%.o)
TEST_OBJ := $(TEST_SRC:%.c=$(BUILD)/obj/%.o)

.PHONY: all test-unit asan fuzz clean arm64
all: $(BUILD)/mlxcel $(BUILD)/mlxcel-server $(BUILD)/mlxcel-tests

# `mlxcel-server` is the same binary under llama-server's name (main.c looks at argv[0]).
$(BUILD)/mlxcel-server: $(BUILD)/mlxcel
	ln -sf mlxcel $@

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -c $< -o $@

$(BUILD)/libmlxcel.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/mlxcel: $(CLI_OBJ) $(BUILD)/libmlxcel.a
	$(CC) $(CFLAGS_ALL) -o $@ $(CLI_OBJ) $(BUILD)/libmlxcel.a $(LDLIBS)

# Tests link the CLI objects too (minus main.c) so CLI helpers are unit-testable.
CLI_NOMAIN_OBJ := $(filter-out $(BUILD)/obj/src/cli/main.o,$(CLI_OBJ))
$(BUILD)/mlxcel-tests: $(TEST_OBJ) $(CLI_NOMAIN_OBJ) $(BUILD)/libmlxcel.a
	$(CC) $(CFLAGS_ALL) -o $@ $(TEST_OBJ) $(CLI_NOMAIN_OBJ) $(BUILD)/libmlxcel.a $(LDLIBS)

test-unit: $(BUILD)/mlxcel-tests
	MXL_REPO_ROOT=$(CURDIR) $(BUILD)/mlxcel-tests

SAN := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
asan:
	$(MAKE) BUILD=build/asan OPT="-O1 -g $(SAN)" all

ARM64_CC ?= aarch64-linux-gnu-gcc
arm64:
	$(MAKE) BUILD=build/arm64 CC=$(ARM64_CC) all

# libFuzzer harnesses: the library is compiled once with the sanitizers and fuzzer coverage
# (fuzzer-no-link) into build/fuzz/libmlxcel.a; each tests/fuzz/fuzz_X.c links against it.
# (MXL_NO_TILE_KERNELS: the harnesses never reach the AMX matmul kernels, whose unrolled
# instantiations take clang many minutes to instrument)
# The per-ISA kernel files (src/backends/cpu/*_avx2.c, *_avx512.c, *_amx.c, *_neon.c) are compiled
# without the sanitizers and coverage: no harness reaches them, and instrumenting their unrolled
# intrinsics took clang over five minutes for quant_mlx_avx512.c alone (3 s plain).
FUZZ_CFLAGS := $(CSTD) $(INC) -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=all -pthread -MMD -MP -DMXL_NO_TILE_KERNELS
FUZZ_OBJ := $(LIB_SRC:%.c=build/fuzz/obj/%.o)
FUZZ_KERNEL_OBJ := $(filter $(foreach i,avx2 avx512 amx neon,build/fuzz/obj/src/backends/cpu/%_$(i).o),$(FUZZ_OBJ))
FUZZ_INSTR := -fsanitize=address,undefined -fno-sanitize-recover=all -fsanitize=fuzzer-no-link
$(FUZZ_KERNEL_OBJ): FUZZ_INSTR :=
fuzz: $(FUZZ_SRC:tests/fuzz/%.c=build/fuzz/%)
build/fuzz/obj/%.o: %.c
	@mkdir -p $(dir $@)
	clang $(CSTD) $(INC) -O1 -g -pthread -MMD -MP -DMXL_NO_TILE_KERNELS $(FUZZ_INSTR) -c $< -o $@
build/fuzz/libmlxcel.a: $(FUZZ_OBJ)
	@rm -f $@
	ar rcs $@ $^
build/fuzz/%: tests/fuzz/%.c build/fuzz/libmlxcel.a
	@mkdir -p build/fuzz
	clang $(FUZZ_CFLAGS) -fsanitize=fuzzer -o $@ $< build/fuzz/libmlxcel.a $(LDLIBS)

clean:
	rm -rf build

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)
-include $(shell find build/fuzz/obj -name '*.d' 2>/dev/null)
