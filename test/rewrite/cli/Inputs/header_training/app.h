// Brings in the steps through another header.
#pragma once
#include <proj/steps.h>
