"""The configuration files each server of a local cluster is started with."""

from xml.sax.saxutils import escape

from apps.core.local_clickhouse.layout import (
    CLUSTER,
    HOST,
    SESSION_TIMEOUT_S,
    SHARDS,
    ZOOKEEPER_TICK_S,
    Cluster,
    Endpoint,
)


def zoo_cfg(cluster: Cluster) -> str:
    """Standalone ZooKeeper on loopback; ``srvr`` answers the readiness check. No admin
    server (it would take port 8080), and forceSync=no: a test cluster trades durability
    on power loss for fewer fsyncs on every replicated insert."""
    return (
        f"tickTime={ZOOKEEPER_TICK_S * 1000}\ndataDir={cluster.zookeeper_dir / 'data'}\n"
        f"clientPort={cluster.zookeeper_port}\nclientPortAddress={HOST}\nmaxClientCnxns=0\n"
        "admin.enableServer=false\n4lw.commands.whitelist=srvr,ruok,mntr\n"
        "forceSync=no\npreAllocSize=4096\nautopurge.snapRetainCount=3\nautopurge.purgeInterval=1\n"
    )


def server_config(cluster: Cluster, endpoint: Endpoint) -> str:
    """config.xml of one server: its ports, files, macros, the ZooKeeper and the cluster.

    A mark cache of 64 MiB (5 GiB by default) and no uncompressed cache; no query_log,
    which would flush every 7.5 s. Any table or partition may be dropped, whatever its size.
    """
    home = escape(str(cluster.server_dir(endpoint)))
    shards = "".join(
        "\n        <shard><internal_replication>true</internal_replication>"
        + "".join(
            f"<replica><host>{e.host}</host><port>{e.port}</port></replica>"
            for e in cluster.endpoints()
            if e.shard == shard
        )
        + "</shard>"
        for shard in range(1, SHARDS + 1)
    )
    return f"""<?xml version="1.0"?>
<yandex>
    <logger>
        <level>information</level>
        <log>{home}/log/server.log</log>
        <errorlog>{home}/log/server.err.log</errorlog>
        <size>50M</size>
        <count>2</count>
    </logger>
    <listen_host>{endpoint.host}</listen_host>
    <tcp_port>{endpoint.port}</tcp_port>
    <http_port>{endpoint.http_port}</http_port>
    <interserver_http_port>{endpoint.interserver_port}</interserver_http_port>
    <interserver_http_host>{endpoint.host}</interserver_http_host>
    <path>{home}/data/</path>
    <tmp_path>{home}/scratch/</tmp_path>
    <user_files_path>{home}/user_files/</user_files_path>
    <format_schema_path>{home}/format_schemas/</format_schema_path>
    <users_config>{home}/users.xml</users_config>
    <default_profile>default</default_profile>
    <default_database>default</default_database>
    <timezone>UTC</timezone>
    <max_connections>256</max_connections>
    <max_concurrent_queries>50</max_concurrent_queries>
    <keep_alive_timeout>3</keep_alive_timeout>
    <mark_cache_size>67108864</mark_cache_size>
    <uncompressed_cache_size>0</uncompressed_cache_size>
    <mlock_executable>false</mlock_executable>
    <max_table_size_to_drop>0</max_table_size_to_drop>
    <max_partition_size_to_drop>0</max_partition_size_to_drop>
    <zookeeper>
        <node><host>{HOST}</host><port>{cluster.zookeeper_port}</port></node>
        <session_timeout_ms>{SESSION_TIMEOUT_S * 1000}</session_timeout_ms>
    </zookeeper>
    <distributed_ddl><path>/clickhouse/task_queue/ddl</path></distributed_ddl>
    <macros><shard>{endpoint.shard}</shard><replica>{endpoint.name}</replica></macros>
    <remote_servers>
      <{CLUSTER}>{shards}
      </{CLUSTER}>
    </remote_servers>
</yandex>
"""


# The one user, default, without a password, from this machine only. Per query at most two
# threads and 2 GB; background pools (merges, fetches, replication queues) of 4 threads
# rather than 16: four servers share two cores.
USERS_XML = """<?xml version="1.0"?>
<yandex>
    <profiles>
        <default>
            <max_memory_usage>2000000000</max_memory_usage>
            <max_memory_usage_for_all_queries>4000000000</max_memory_usage_for_all_queries>
            <max_threads>2</max_threads>
            <use_uncompressed_cache>0</use_uncompressed_cache>
            <load_balancing>in_order</load_balancing>
            <background_pool_size>4</background_pool_size>
            <background_schedule_pool_size>4</background_schedule_pool_size>
        </default>
    </profiles>
    <users>
        <default>
            <password></password>
            <networks><ip>127.0.0.1</ip><ip>::1</ip></networks>
            <profile>default</profile>
            <quota>default</quota>
        </default>
    </users>
    <quotas><default></default></quotas>
</yandex>
"""
