# Build options: warnings, sanitizers, fuzzing, tests.
option(FM_WERROR "Treat compiler warnings as errors" OFF)
option(FM_TESTS "Build the tests" ON)
option(FM_FUZZ "Build the libFuzzer targets (needs clang)" OFF)
set(FM_SANITIZE "" CACHE STRING "Sanitizers for the whole build, e.g. address,undefined")

add_compile_definitions(_GNU_SOURCE)
add_compile_options(-Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes
                    -Wno-missing-field-initializers)
if(FM_WERROR)
  add_compile_options(-Werror)
endif()
if(FM_FUZZ)
  # Coverage for libFuzzer in everything the targets link.
  add_compile_options(-fsanitize=fuzzer-no-link)
endif()
if(FM_SANITIZE)
  add_compile_options(-fsanitize=${FM_SANITIZE} -fno-sanitize-recover=all
                      -fno-omit-frame-pointer)
  add_link_options(-fsanitize=${FM_SANITIZE})
endif()

# Installed programs find libfastmsg.so next to them.
set(CMAKE_INSTALL_RPATH "$ORIGIN/../${CMAKE_INSTALL_LIBDIR}")

# fm_unit_test(name source...): a unit test beside the code, run by ctest.
function(fm_unit_test name)
  add_executable(${name} ${ARGN})
  target_link_libraries(${name} PRIVATE fm_testkit)
  add_test(NAME unit.${name} COMMAND ${name})
endfunction()
