select id, name, amount from {{ source('work', 'a') }}
