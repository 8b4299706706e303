// The one doctest main of the kattn_tests executable. Test files are listed in
// tests/meson.build (test_sources) and contain only TEST_CASEs.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>
