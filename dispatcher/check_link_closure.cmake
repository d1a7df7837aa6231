# The check behind the test dispatcher_link_closure: the dispatcher links only what pipeline
# validation and split enumeration need (PipelineSpec, pipeline/spec/), never an op iterator, a
# UDF implementation, an image codec or the assembled pipeline. Run as
#   cmake -DCLOSURE=<file written by granary_write_link_closure> -P check_link_closure.cmake
# it fails naming each forbidden item and the chain of links that brings it in.
cmake_minimum_required(VERSION 3.22)
set(forbidden_targets granary_pipeline granary_pipeline_ops granary_pipeline_udfs
    granary_pipeline_image granary_pipeline_stage_plan granary_pipeline_optimizer granary_cache
    JPEG::JPEG PNG::PNG)
# Libraries named by path rather than by target.
set(forbidden_files "(^|/)lib(jpeg|png)[^/]*$")

if(NOT EXISTS "${CLOSURE}")
  message(FATAL_ERROR "no link closure at '${CLOSURE}': reconfigure the build")
endif()
file(STRINGS "${CLOSURE}" lines)
# items[i] was linked by parents[i].
set(items "")
set(parents "")
foreach(line IN LISTS lines)
  if(NOT line MATCHES "^(.+) <- (.+)$")
    message(FATAL_ERROR "${CLOSURE}: malformed line '${line}'")
  endif()
  list(APPEND items "${CMAKE_MATCH_1}")
  list(APPEND parents "${CMAKE_MATCH_2}")
endforeach()
if(NOT items)
  message(FATAL_ERROR "${CLOSURE} is empty: the dispatcher's targets were not found")
endif()

set(failures "")
foreach(item IN LISTS items)
  if(item IN_LIST forbidden_targets OR item MATCHES "${forbidden_files}")
    set(chain "${item}")
    set(at "${item}")
    while(TRUE)
      list(FIND items "${at}" index)
      list(GET parents ${index} at)
      if(at STREQUAL "(root)")
        break()
      endif()
      string(PREPEND chain "${at} -> ")
    endwhile()
    string(APPEND failures "  ${chain}\n")
  endif()
endforeach()
if(failures)
  message(FATAL_ERROR
          "the dispatcher links what only a worker needs (pipeline/spec/ holds what validation "
          "and split enumeration need; pipeline/core/pipeline_registries.h):\n${failures}")
endif()
list(LENGTH items count)
message(STATUS "the dispatcher's link closure (${count} items) holds no forbidden item")
