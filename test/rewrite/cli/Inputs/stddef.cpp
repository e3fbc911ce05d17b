// stddef.h is one of clang's builtin headers: it comes from the resource directory.
#include <stddef.h>
size_t Count;
