# Per-target compile settings: warnings (errors with WEFT_WERROR) and sanitizers. Applied to
# weft's own targets only, never through global flags.
function(weft_target_defaults target)
    target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic)
    if(WEFT_WERROR)
        target_compile_options(${target} PRIVATE -Werror)
    endif()
    weft_target_sanitize(${target})
endfunction()

function(weft_target_sanitize target)
    if(WEFT_SANITIZE)
        target_compile_options(${target} PUBLIC $<BUILD_INTERFACE:-fsanitize=${WEFT_SANITIZE} -fno-omit-frame-pointer>)
        target_link_options(${target} PUBLIC $<BUILD_INTERFACE:-fsanitize=${WEFT_SANITIZE}>)
    endif()
endfunction()
