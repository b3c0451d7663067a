# nginx addon make script, read by nginx's configure after config: the rule
# that writes the window script's text (see src/scripts/lua/assemble.pl)
# again when one of its parts, the protocol header or the script changes.

RATELIMIT_LUA="$(echo $ngx_addon_dir/src/scripts/lua/*.lua)"

cat << END                                                 >> $NGX_MAKEFILE

$RATELIMIT_SCRIPT_SRC:	$RATELIMIT_LUA \\
		$ngx_addon_dir/src/scripts/lua/assemble.pl \\
		$ngx_addon_dir/src/protocol/batch_protocol.hpp
	perl $ngx_addon_dir/src/scripts/lua/assemble.pl \\
		$ngx_addon_dir/src/scripts/lua \\
		$ngx_addon_dir/src/protocol/batch_protocol.hpp \\
		$RATELIMIT_SCRIPT_SRC

END
