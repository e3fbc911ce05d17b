// What a precompiled header was made from: flags.cpp checks that it is still included.
#define FLAGS_PCH_HEADER_INCLUDED 1
